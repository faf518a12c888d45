/* PCIe link facts from sysfs: the text parsers, bus id spelling, and pcie_link_json against
 * fixture directories laid out like /sys/bus/pci/devices. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "pcie.h"
#include "testutil.h"

static void test_speed_generations(void **state)
{
        assert_int_equal(pcie_parse_speed_gen("2.5 GT/s PCIe\n"), 1);
        assert_int_equal(pcie_parse_speed_gen("5.0 GT/s PCIe\n"), 2);
        assert_int_equal(pcie_parse_speed_gen("8.0 GT/s PCIe\n"), 3);
        assert_int_equal(pcie_parse_speed_gen("16.0 GT/s PCIe\n"), 4);
        assert_int_equal(pcie_parse_speed_gen("32.0 GT/s PCIe\n"), 5);
        assert_int_equal(pcie_parse_speed_gen("64.0 GT/s PCIe\n"), 6);
        /* older kernels print no suffix and no decimals */
        assert_int_equal(pcie_parse_speed_gen("8 GT/s"), 3);
        assert_int_equal(pcie_parse_speed_gen("2.5 GT/s"), 1);
}

static void test_speed_garbage(void **state)
{
        assert_int_equal(pcie_parse_speed_gen("Unknown speed\n"), -EINVAL);
        assert_int_equal(pcie_parse_speed_gen(""), -EINVAL);
        assert_int_equal(pcie_parse_speed_gen("32.0"), -EINVAL);
        assert_int_equal(pcie_parse_speed_gen("12.0 GT/s PCIe"), -EINVAL);
        assert_int_equal(pcie_parse_speed_gen(NULL), -EINVAL);
}

static void test_width(void **state)
{
        assert_int_equal(pcie_parse_width("16\n"), 16);
        assert_int_equal(pcie_parse_width("1"), 1);
        assert_int_equal(pcie_parse_width("0\n"), -EINVAL); /* link down */
        assert_int_equal(pcie_parse_width("x16"), -EINVAL);
        assert_int_equal(pcie_parse_width("16 lanes"), -EINVAL);
        assert_int_equal(pcie_parse_width("64"), -EINVAL);
        assert_int_equal(pcie_parse_width(""), -EINVAL);
}

static void test_bus_id(void **state)
{
        char buf[16];

        assert_int_equal(pcie_normalize_bus_id("00000000:1A:00.0", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0000:1a:00.0");
        assert_int_equal(pcie_normalize_bus_id("0001:C3:1f.7", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0001:c3:1f.7");
        assert_int_equal(pcie_normalize_bus_id("1a:00.0", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0000:1a:00.0");
        assert_int_equal(pcie_normalize_bus_id("1a:00", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(pcie_normalize_bus_id("zz:00.0", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(pcie_normalize_bus_id("10000:1a:00.0", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(pcie_normalize_bus_id("0000:1a:20.0", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(pcie_normalize_bus_id("0000:1a:00.8", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(pcie_normalize_bus_id("", buf, sizeof(buf)), -EINVAL);
}

static void test_link_rate_after_encoding(void **state)
{
        assert_true(fabs(pcie_link_gbps(5, 16) - 63.015) < 0.01);
        assert_true(fabs(pcie_link_gbps(4, 16) - 31.5) < 0.01);
        assert_true(pcie_link_gbps(0, 16) == 0);
}

static void test_link_rate_gen1_and_gen6_encodings(void **state)
{
        /* 8b/10b at Gen1, FLIT (242 of 256 bytes) at Gen6. */
        assert_true(fabs(pcie_link_gbps(1, 1) - 0.25) < 1e-9);
        assert_true(fabs(pcie_link_gbps(6, 16) - 64.0 * 16 * 242 / 256 / 8) < 1e-9);
        assert_true(pcie_link_gbps(7, 16) == 0);
        assert_true(pcie_link_gbps(5, 0) == 0);
}

static void write_file(const char *dir, const char *name, const char *text)
{
        char path[1024];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* Lays out root/bus_id/ as sysfs does, with the four link attributes given (NULL: no such
 * file). */
static void fixture_device(const char *root, const char *bus_id, const char *current_speed,
                           const char *current_width, const char *max_speed, const char *max_width)
{
        const char *files[][2] = {
            {"current_link_speed", current_speed},
            {"current_link_width", current_width},
            {"max_link_speed", max_speed},
            {"max_link_width", max_width},
        };
        char dev[512];

        snprintf(dev, sizeof(dev), "%s/%s", root, bus_id);
        assert_int_equal(mkdir(dev, 0755), 0);
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
                if (files[i][1])
                        write_file(dev, files[i][0], files[i][1]);
}

static void test_link_json_from_fixture(void **state)
{
        char *root = scratch_dir_new();
        json_t *o;

        assert_non_null(root);
        /* An H200 idling at a lower speed (links train down when idle) */
        fixture_device(root, "0000:1a:00.0", "2.5 GT/s PCIe\n", "16\n", "32.0 GT/s PCIe\n", "16\n");

        /* CUDA spells the bus id with an 8-digit domain and capitals */
        o = pcie_link_json(root, "00000000:1A:00.0");
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "current_gen")), 1);
        assert_int_equal(json_integer_value(json_object_get(o, "current_width")), 16);
        assert_int_equal(json_integer_value(json_object_get(o, "max_gen")), 5);
        assert_int_equal(json_integer_value(json_object_get(o, "max_width")), 16);
        json_decref(o);
        scratch_dir_free(root);
}

static void test_link_json_null_where_unreadable(void **state)
{
        char *root = scratch_dir_new();
        json_t *o;

        assert_non_null(root);
        /* max_link_width missing */
        fixture_device(root, "0000:3b:00.0", "Unknown speed\n", "0\n", "16.0 GT/s PCIe\n", NULL);

        o = pcie_link_json(root, "0000:3b:00.0");
        assert_non_null(o);
        assert_int_equal(json_object_size(o), 4);
        assert_true(json_is_null(json_object_get(o, "current_gen")));
        assert_true(json_is_null(json_object_get(o, "current_width")));
        assert_int_equal(json_integer_value(json_object_get(o, "max_gen")), 4);
        assert_true(json_is_null(json_object_get(o, "max_width")));
        json_decref(o);

        /* no such device, and a bus id that is not one: all four null, never a failure */
        o = pcie_link_json(root, "0000:99:00.0");
        assert_non_null(o);
        assert_true(json_is_null(json_object_get(o, "max_gen")));
        json_decref(o);
        o = pcie_link_json(root, "../../etc");
        assert_non_null(o);
        assert_int_equal(json_object_size(o), 4);
        assert_true(json_is_null(json_object_get(o, "current_gen")));
        json_decref(o);
        scratch_dir_free(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_speed_generations),
            cmocka_unit_test(test_speed_garbage),
            cmocka_unit_test(test_width),
            cmocka_unit_test(test_bus_id),
            cmocka_unit_test(test_link_json_from_fixture),
            cmocka_unit_test(test_link_json_null_where_unreadable),
            cmocka_unit_test(test_link_rate_after_encoding),
            cmocka_unit_test(test_link_rate_gen1_and_gen6_encodings),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
