/* A libnvidia-ml stand-in for the shim's tests: an NVML too old for umd, with init and its
 * error words but no device lookups, so a resolve of nvml.c's table must fail and name the
 * first required entry point it lacks. Also the library test_dlib resolves tables in. */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int r);

int nvmlInit_v2(void)
{
        return 0;
}

int nvmlShutdown(void)
{
        return 0;
}

const char *nvmlErrorString(int r)
{
        return r == 0 ? "Success" : "Unknown Error";
}
