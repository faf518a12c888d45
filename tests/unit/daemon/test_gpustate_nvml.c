/* gpustate.c's link reads through the real NVML loader (common/nvml.c built to load umd's fake
 * NVML, tests/fake_nvml/, in the state of links.json): the NVLinks up, each up link's CRC, replay
 * and recovery counters by NVML's numbers, the PCIe replay counter; a driver without the error
 * counter entry point still says which links are up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config.h"
#include "gpustate.h"

static void test_links_and_their_counters_are_read(void **state)
{
        struct umd_config cfg;
        struct gpu_state st;

        config_init(&cfg);
        gpustate_init(&cfg);
        assert_string_equal(gpustate_backend(), "nvml");
        gpustate_query("GPU-links", -1, 0, 0, &st);
        assert_true(st.known);
        assert_int_equal(st.replay_counter, 42);
        assert_int_equal(st.nvlinks_active, 12);
#ifdef FAKE_NVML_NO_ERROR_COUNTER
        for (size_t l = 0; l < GPU_STATE_NVLINKS_MAX; l++)
                assert_int_equal(st.nvlink_errors[l][GPU_NVLINK_CRC], -1);
#else
        /* NVML_NVLINK_ERROR_DL_CRC_FLIT 2, _DL_REPLAY 0, _DL_RECOVERY 1 */
        assert_int_equal(st.nvlink_errors[3][GPU_NVLINK_CRC], 302);
        assert_int_equal(st.nvlink_errors[3][GPU_NVLINK_REPLAY], 300);
        assert_int_equal(st.nvlink_errors[3][GPU_NVLINK_RECOVERY], 301);
        assert_int_equal(st.nvlink_errors[0][GPU_NVLINK_CRC], 2);
        /* a link down, and one that does not exist, have no counters */
        assert_int_equal(st.nvlink_errors[12][GPU_NVLINK_CRC], -1);
        assert_int_equal(st.nvlink_errors[17][GPU_NVLINK_CRC], -1);
#endif
        gpustate_query("GPU-other", -1, 0, 0, &st);
        assert_false(st.known);
        assert_int_equal(st.nvlinks_active, -1);
        gpustate_shutdown();
        config_free(&cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_links_and_their_counters_are_read),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
