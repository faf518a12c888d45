/* A libnvidia-ml.so.1 stand-in for the Xid watch's NVML source (test_xid.py): loaded by the real
 * common/nvml.c through LD_LIBRARY_PATH, it knows umd's fake GPUs by their uuids and hands out
 * the Xid events written to $FAKE_NVML_XID_FILE, one "INDEX CODE" line each, as
 * nvmlEventSetWait_v2 events. Every other entry point umd requires answers "not supported". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NVML_SUCCESS         0
#define NVML_ERROR_NOT_SUPP  3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_TIMEOUT   10
#define FAKE_UUID_PREFIX     "GPU-fa4e0000-0000-4000-8000-"
#define FAKE_POLL_NS         10000000L /* how often a wait looks at the file: 10 ms */
#define FAKE_LINE_MAX        64

struct event_data {
        void *device;
        unsigned long long type, data;
        unsigned gi, ci;
};

static long consumed; /* bytes of the file handed out already */

int nvmlInit_v2(void);
int nvmlDeviceGetHandleByUUID(const char *uuid, void **ret);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **ret);
int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *n, void *p);
int nvmlDeviceGetNvLinkState(void *d, unsigned link, int *ret);
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *d, unsigned link, void *ret);
int nvmlEventSetCreate(void **ret);
int nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *set);
int nvmlEventSetWait_v2(void *set, struct event_data *ret, unsigned timeout_ms);
int nvmlEventSetFree(void *set);

int nvmlInit_v2(void)
{
        return NVML_SUCCESS;
}

/* The handle of fake GPU i is i + 1 (never NULL). */
int nvmlDeviceGetHandleByUUID(const char *uuid, void **ret)
{
        if (strncmp(uuid, FAKE_UUID_PREFIX, strlen(FAKE_UUID_PREFIX)) != 0)
                return NVML_ERROR_NOT_FOUND;
        *ret = (void *)(uintptr_t)(strtoul(uuid + strlen(FAKE_UUID_PREFIX), NULL, 16) + 1);
        return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **ret)
{
        return NVML_ERROR_NOT_FOUND;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *n, void *p)
{
        return NVML_ERROR_NOT_SUPP;
}

int nvmlDeviceGetNvLinkState(void *d, unsigned link, int *ret)
{
        return NVML_ERROR_NOT_SUPP;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *d, unsigned link, void *ret)
{
        return NVML_ERROR_NOT_SUPP;
}

int nvmlEventSetCreate(void **ret)
{
        *ret = &consumed;
        return NVML_SUCCESS;
}

int nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *set)
{
        return NVML_SUCCESS;
}

/* The next unread "INDEX CODE" line of the file, if there is one. */
static int next_event(struct event_data *ret)
{
        const char *path = getenv("FAKE_NVML_XID_FILE");
        FILE *f = path ? fopen(path, "r") : NULL;
        char line[FAKE_LINE_MAX];
        unsigned idx, code;
        int r = 0;

        if (!f)
                return 0;
        if (fseek(f, consumed, SEEK_SET) == 0 && fgets(line, sizeof(line), f) &&
            strchr(line, '\n') && sscanf(line, "%u %u", &idx, &code) == 2) {
                consumed += (long)strlen(line);
                *ret = (struct event_data){
                    .device = (void *)(uintptr_t)(idx + 1), .type = 8, .data = code};
                r = 1;
        }
        fclose(f);
        return r;
}

int nvmlEventSetWait_v2(void *set, struct event_data *ret, unsigned timeout_ms)
{
        struct timespec step = {0, FAKE_POLL_NS};

        for (unsigned waited = 0; waited <= timeout_ms; waited += FAKE_POLL_NS / 1000000) {
                if (next_event(ret))
                        return NVML_SUCCESS;
                nanosleep(&step, NULL);
        }
        return NVML_ERROR_TIMEOUT;
}

int nvmlEventSetFree(void *set)
{
        return NVML_SUCCESS;
}
