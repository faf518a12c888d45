/* placement.c: CPU lists as sysfs writes them, and a GPU's NUMA node and local CPUs read from a
 * sysfs-shaped fixture folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "placement.h"

static void test_cpulist_round_trips(void **state)
{
        cpu_set_t set;
        char buf[64];

        assert_int_equal(cpulist_parse("0-3,8,10-11\n", &set), 0);
        assert_int_equal(CPU_COUNT(&set), 7);
        cpulist_format(&set, buf, sizeof(buf));
        assert_string_equal(buf, "0-3,8,10-11");
}

static void test_cpulist_refuses_nonsense(void **state)
{
        cpu_set_t set;

        assert_int_equal(cpulist_parse("3-1", &set), -EINVAL);
        assert_int_equal(cpulist_parse("a", &set), -EINVAL);
        assert_int_equal(cpulist_parse("1,,2", &set), -EINVAL);
        assert_int_equal(cpulist_parse("99999", &set), -EINVAL);
}

static void test_cpulist_format_truncates_visibly(void **state)
{
        cpu_set_t set;
        char buf[8];

        CPU_ZERO(&set);
        for (int c = 0; c < 40; c += 2)
                CPU_SET(c, &set);
        cpulist_format(&set, buf, sizeof(buf));
        assert_non_null(strstr(buf, "..."));
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void test_gpu_node_and_local_cpus_come_from_sysfs(void **state)
{
        char dir[] = "/tmp/umd-placement-XXXXXX", dev[128], path[192];
        cpu_set_t cpus;
        bool has;
        int node;

        assert_non_null(mkdtemp(dir));
        snprintf(dev, sizeof(dev), "%s/0000:1b:00.0", dir);
        assert_int_equal(mkdir(dev, 0700), 0);
        snprintf(path, sizeof(path), "%s/numa_node", dev);
        write_file(path, "1\n");
        snprintf(path, sizeof(path), "%s/local_cpulist", dev);
        write_file(path, "16-31\n");
        /* CUDA spells the bus id with an 8-digit domain, in capitals */
        placement_gpu(dir, "00000000:1B:00.0", &node, &cpus, &has);
        assert_int_equal(node, 1);
        assert_true(has);
        assert_int_equal(CPU_COUNT(&cpus), 16);
        /* a host without NUMA says -1; an unknown device is unknown */
        write_file(path, "");
        snprintf(path, sizeof(path), "%s/numa_node", dev);
        write_file(path, "-1\n");
        placement_gpu(dir, "0000:1b:00.0", &node, &cpus, &has);
        assert_int_equal(node, -1);
        assert_false(has);
        placement_gpu(dir, "0000:aa:00.0", &node, &cpus, &has);
        assert_int_equal(node, -1);
        assert_false(has);
}

static void test_self_placement_names_this_process_cpus(void **state)
{
        json_t *o = placement_self_json(NULL);

        assert_non_null(o);
        assert_non_null(json_string_value(json_object_get(o, "cpus")));
        assert_non_null(json_object_get(o, "numa_node"));
        json_decref(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cpulist_round_trips),
            cmocka_unit_test(test_cpulist_refuses_nonsense),
            cmocka_unit_test(test_cpulist_format_truncates_visibly),
            cmocka_unit_test(test_gpu_node_and_local_cpus_come_from_sysfs),
            cmocka_unit_test(test_self_placement_names_this_process_cpus),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
