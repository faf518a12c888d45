/* xid_parse.c on every fixture line (tests/fixtures/xid/kernel-lines.txt: real driver lines with
 * their sources), and xid_table.c: the catalog's actions, what fails a GPU, the overrides. */
#include "xid_parse.h"
#include "xid_table.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define LINE_MAX_LEN 2048

static const char *fixtures_path;

static void parse_or_fail(const char *line, struct xid_line *x)
{
        if (xid_parse_line(line, x) != 1)
                fail_msg("not parsed: %s", line);
}

static void test_every_fixture_line(void **state)
{
        (void)state;
        FILE *f = fopen(fixtures_path, "r");
        char buf[LINE_MAX_LEN];
        int n = 0;

        assert_non_null(f);
        while (fgets(buf, sizeof(buf), f)) {
                buf[strcspn(buf, "\n")] = '\0';
                if (!buf[0] || buf[0] == '#')
                        continue;
                char *bar = strchr(buf, '|');
                assert_non_null(bar);
                *bar = '\0';
                const char *line = bar + 1;
                struct xid_line x;
                n++;
                if (strcmp(buf, "none") == 0) {
                        if (xid_parse_line(line, &x) != 0)
                                fail_msg("parsed a line that is no Xid: %s", line);
                        continue;
                }
                char kind[32], bus[32], proc[64];
                unsigned code;
                int pid;
                assert_int_equal(
                    sscanf(buf, "%31[^,],%u,%31[^,],%d,%63s", kind, &code, bus, &pid, proc), 5);
                parse_or_fail(line, &x);
                static const char *const kinds[] = {"xid", "sxid", "fallen_off_bus"};
                assert_string_equal(kinds[x.kind], kind);
                assert_int_equal(x.code, code);
                assert_string_equal(x.bus, bus);
                assert_int_equal(x.pid, pid);
                assert_string_equal(x.process[0] ? x.process : "-", proc);
                assert_non_null(strstr(line, x.text)); /* the driver's words, unchanged */
        }
        fclose(f);
        assert_true(n >= 20);
}

static void test_bus_spellings_normalise_alike(void **state)
{
        (void)state;
        const char *forms[] = {"PCI:0000:3B:00", "00000000:3B:00.0", "0000:3b:00", "3b:00.0",
                               "0000:3b:00.0"};
        char out[XID_BUS_MAX];
        for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
                assert_int_equal(xid_normalise_bus(forms[i], out), 0);
                assert_string_equal(out, "0000:3b:00.0");
        }
        assert_int_equal(xid_normalise_bus("GPU-fa4e", out), -EINVAL);
        assert_int_equal(xid_normalise_bus("0000:3b:00.9", out), -EINVAL);
}

static void test_kmsg_record(void **state)
{
        (void)state;
        uint64_t seq = 0, usec = 0;
        const char *msg = NULL;
        assert_int_equal(xid_parse_kmsg("4,1234,5678901,-,caller=T1;NVRM: Xid (PCI:0000:01:00): "
                                        "31, pid=1",
                                        &seq, &usec, &msg),
                         0);
        assert_int_equal(seq, 1234);
        assert_int_equal(usec, 5678901);
        assert_string_equal(msg, "NVRM: Xid (PCI:0000:01:00): 31, pid=1");
        assert_int_equal(xid_parse_kmsg(" DEVICE=+pci:0000:01:00.0", &seq, &usec, &msg), -EINVAL);
}

static enum health_action action_of(const char *line, bool *known)
{
        struct xid_line x;
        parse_or_fail(line, &x);
        return xid_table_action(NULL, &x, known);
}

static void test_application_xids_fail_nothing(void **state)
{
        (void)state;
        const unsigned codes[] = {13, 31, 43, 45};
        bool known;
        for (size_t i = 0; i < 4; i++) {
                char line[128];
                snprintf(line, sizeof(line), "NVRM: Xid (PCI:0000:01:00): %u, pid=7, name=a, x",
                         codes[i]);
                enum health_action a = action_of(line, &known);
                assert_true(known);
                assert_false(xid_action_fails(a));
        }
}

static void test_failing_xids_and_their_actions(void **state)
{
        (void)state;
        bool known;
        assert_int_equal(
            action_of("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", &known),
            HEALTH_ACTION_REBOOT_NODE);
        assert_int_equal(action_of("NVRM: GPU at 0000:01:00.0 has fallen off the bus.", &known),
                         HEALTH_ACTION_REBOOT_NODE);
        assert_int_equal(
            action_of("NVRM: Xid (PCI:0000:3b:00): 95, pid=1, name=p, Uncontained", &known),
            HEALTH_ACTION_RESET_GPU);
        assert_true(xid_action_fails(HEALTH_ACTION_RESET_GPU));
        /* Xid 154 takes the recovery action it names */
        assert_int_equal(action_of("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed "
                                   "from 0x0 (None) to 0x1 (GPU Reset Required)",
                                   &known),
                         HEALTH_ACTION_RESET_GPU);
        /* NVLink Xids by their Fatal/Nonfatal word; SXids likewise */
        assert_int_equal(
            action_of("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0", &known),
            HEALTH_ACTION_NONE);
        assert_int_equal(
            action_of("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0", &known),
            HEALTH_ACTION_RESET_GPU);
        assert_int_equal(action_of("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 20034, Fatal, Link "
                                   "30 LTSSM Fault Up",
                                   &known),
                         HEALTH_ACTION_REBOOT_NODE);
        assert_int_equal(action_of("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, "
                                   "Link 44",
                                   &known),
                         HEALTH_ACTION_NONE);
}

static void test_unknown_code_is_none_and_unknown(void **state)
{
        (void)state;
        bool known = true;
        assert_int_equal(action_of("NVRM: Xid (PCI:0000:01:00): 9999, something", &known),
                         HEALTH_ACTION_NONE);
        assert_false(known);
}

static void test_overrides_win(void **state)
{
        (void)state;
        struct xid_overrides ov;
        char err[256];
        struct xid_line x;
        bool known;
        assert_int_equal(xid_overrides_parse("13:reset_gpu, 79:service", &ov, err, sizeof(err)), 0);
        assert_int_equal(ov.n, 2);
        parse_or_fail("NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception", &x);
        assert_int_equal(xid_table_action(&ov, &x, &known), HEALTH_ACTION_RESET_GPU);
        parse_or_fail("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", &x);
        assert_int_equal(xid_table_action(&ov, &x, &known), HEALTH_ACTION_SERVICE);
        assert_int_equal(xid_overrides_parse("", &ov, err, sizeof(err)), 0);
        assert_int_equal(ov.n, 0);
}

static void test_bad_overrides_say_what(void **state)
{
        (void)state;
        struct xid_overrides ov = {.n = 7};
        char err[256];
        assert_int_equal(xid_overrides_parse("13:reboot", &ov, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "'reboot' is no action"));
        assert_int_equal(xid_overrides_parse("x:none", &ov, err, sizeof(err)), -EINVAL);
        assert_int_equal(xid_overrides_parse("13:", &ov, err, sizeof(err)), -EINVAL);
        assert_int_equal(ov.n, 7); /* untouched */
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_fixture_line),
            cmocka_unit_test(test_bus_spellings_normalise_alike),
            cmocka_unit_test(test_kmsg_record),
            cmocka_unit_test(test_application_xids_fail_nothing),
            cmocka_unit_test(test_failing_xids_and_their_actions),
            cmocka_unit_test(test_unknown_code_is_none_and_unknown),
            cmocka_unit_test(test_overrides_win),
            cmocka_unit_test(test_bad_overrides_say_what),
        };
        fixtures_path = argc > 1 ? argv[1] : "tests/fixtures/xid/kernel-lines.txt";
        return cmocka_run_group_tests(tests, NULL, NULL);
}
