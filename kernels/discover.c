/* Owns `umd-worker --list` on real hardware: what the CUDA runtime says about each GPU, plus
 * its PCIe link from sysfs. Plain C against the runtime's C API; never launches work. */
#include "bench.h"
#include "discover.h"
#include "pcie.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cudaDriverGetVersion reports 0 when libcuda cannot be loaded at all. */
/* A uuid as --list spells it, "GPU-" and 36 characters (41 bytes with the NUL), with room. */
#define DISCOVER_UUID_MAX 48
/* cudaDeviceGetPCIBusId's "dddddddd:bb:dd.f": 16 bytes and the NUL, with room. */
#define DISCOVER_BUS_ID_MAX 32
/* A compute capability, "major.minor". */
#define DISCOVER_CC_MAX 16
/* A runtime error's message: "device N: " and the runtime's words. */
#define DISCOVER_WHY_MAX 256

static const char no_driver[] = "no NVIDIA driver (libcuda.so.1 is not installed or not loadable)";

void discover_format_uuid(const void *bytes, char *buf, size_t len)
{
        const unsigned char *b = bytes;

        snprintf(buf, len,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
}

static json_t *attr_bool(int dev, enum cudaDeviceAttr attr)
{
        int v = 0;

        if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess)
                return json_null();
        return json_boolean(v != 0);
}

/* One device's entry; NULL with *ret_why on a runtime error. */
static json_t *describe(int dev, int driver, int runtime, char **ret_why)
{
        struct cudaDeviceProp p;
        char bus_id[DISCOVER_BUS_ID_MAX], cc[DISCOVER_CC_MAX], uuid[DISCOVER_UUID_MAX];
        size_t mem_free = 0, mem_total = 0;
        cudaError_t e;
        json_t *o = NULL;

        e = cudaGetDeviceProperties(&p, dev);
        if (e == cudaSuccess)
                e = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), dev);
        /* Free memory needs a context on the device; the process exits right after. */
        if (e == cudaSuccess)
                e = cudaSetDevice(dev);
        if (e == cudaSuccess)
                e = cudaMemGetInfo(&mem_free, &mem_total);
        if (e != cudaSuccess) {
                char buf[DISCOVER_WHY_MAX];

                snprintf(buf, sizeof(buf), "device %d: %s", dev, cudaGetErrorString(e));
                *ret_why = strdup(buf);
                return NULL;
        }
        discover_format_uuid(p.uuid.bytes, uuid, sizeof(uuid));
        snprintf(cc, sizeof(cc), "%d.%d", p.major, p.minor);
        o = json_pack("{s:s, s:i, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:i, s:i}", "uuid", uuid,
                      "index", dev, "name", p.name, "pci_bus_id", bus_id, "compute_capability", cc,
                      "memory_total_bytes", (json_int_t)mem_total, "memory_free_bytes",
                      (json_int_t)mem_free, "sm_count", p.multiProcessorCount, "async_engine_count",
                      p.asyncEngineCount, "driver_version", driver, "runtime_version", runtime);
        if (!o)
                return NULL;
        json_object_set_new(o, "concurrentManagedAccess",
                            attr_bool(dev, cudaDevAttrConcurrentManagedAccess));
        json_object_set_new(o, "pageableMemoryAccess",
                            attr_bool(dev, cudaDevAttrPageableMemoryAccess));
        json_object_set_new(o, "pageableMemoryAccessUsesHostPageTables",
                            attr_bool(dev, cudaDevAttrPageableMemoryAccessUsesHostPageTables));
        json_object_set_new(o, "canMapHostMemory", attr_bool(dev, cudaDevAttrCanMapHostMemory));
        json_object_set_new(o, "hostNativeAtomicSupported",
                            attr_bool(dev, cudaDevAttrHostNativeAtomicSupported));
        json_object_set_new(o, "directManagedMemAccessFromHost",
                            attr_bool(dev, cudaDevAttrDirectManagedMemAccessFromHost));
        json_object_set_new(o, "pcie", pcie_link_json(PCIE_SYSFS_DEVICES, bus_id));
        json_object_set_new(o, "fake", json_false());
        return o;
}

/* The driver and runtime versions and the device count: NULL, or why not (a static string). */
static const char *probe(int *driver, int *runtime, int *count)
{
        cudaError_t e = cudaDriverGetVersion(driver);

        if (e == cudaSuccess && *driver == 0)
                return no_driver;
        if (e == cudaSuccess)
                e = cudaRuntimeGetVersion(runtime);
        if (e == cudaSuccess)
                e = cudaGetDeviceCount(count);
        return e == cudaSuccess ? NULL : cudaGetErrorString(e);
}

json_t *bench_list_devices(char **ret_why)
{
        int count = 0, driver = 0, runtime = 0;
        const char *fail;
        char *why = NULL;
        json_t *list;

        list = json_array();
        if (!list)
                return NULL;
        fail = probe(&driver, &runtime, &count);
        if (fail) {
                why = strdup(fail);
                goto out;
        }
        if (count == 0)
                why = strdup("no CUDA devices");
        for (int dev = 0; dev < count; dev++) {
                json_t *d = describe(dev, driver, runtime, &why);

                if (!d) {
                        /* One broken GPU must not hide the others: skip it, say why. */
                        fprintf(stderr, "umd-worker: skipping %s\n", why ? why : "a device");
                        free(why);
                        why = NULL;
                        continue;
                }
                json_array_append_new(list, d);
        }
        if (count > 0 && json_array_size(list) == 0)
                why = strdup("no usable CUDA devices");
out:
        if (ret_why)
                *ret_why = why;
        else
                free(why);
        return list;
}

int discover_device(const char *id, int *ret_ordinal, json_t **ret_info, char **ret_why)
{
        int count = 0, driver = 0, runtime = 0;
        char *end, *why = NULL;
        const char *fail;
        long want_index;

        errno = 0;
        want_index = strtol(id, &end, 10);
        if (errno != 0 || end == id || *end != '\0')
                want_index = -1;

        fail = probe(&driver, &runtime, &count);
        if (fail) {
                *ret_why = strdup(fail);
                return -ENODEV;
        }
        for (int dev = 0; dev < count; dev++) {
                struct cudaDeviceProp p;
                char uuid[DISCOVER_UUID_MAX];
                bool match;
                json_t *info;

                if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
                        continue;
                discover_format_uuid(p.uuid.bytes, uuid, sizeof(uuid));
                match = want_index >= 0 ? want_index == dev : strcmp(uuid, id) == 0;
                if (!match)
                        continue;
                info = describe(dev, driver, runtime, &why);
                if (!info) {
                        *ret_why = why;
                        return -EIO;
                }
                *ret_ordinal = dev;
                *ret_info = info;
                return 0;
        }
        if (asprintf(ret_why, "no CUDA device %s among %d", id, count) < 0)
                *ret_why = NULL;
        return -ENODEV;
}
