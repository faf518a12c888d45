/* NVML, loaded at run time: the one loader and the one set of types for umd and its worker.
 *
 * NVML comes with the driver, not the toolkit, and umd must run where it is absent: it is
 * dlopen'ed, never linked, and nvml.h (not in every toolkit install) is not included. The types
 * below are the few the calls use, laid out as nvml.h declares them (the ABI of these calls is
 * stable; enums are passed as int). */
#pragma once

#define NVML_SONAME_DEFAULT "libnvidia-ml.so.1"

#define NVML_SUCCESS                       0
#define NVML_ERROR_INSUFFICIENT_SIZE       7
#define NVML_FEATURE_ON                    1 /* nvmlEnableState_t */
#define NVML_CLOCK_GRAPH                   0 /* nvmlClockType_t */
#define NVML_CLOCK_SM                      1
#define NVML_CLOCK_MEM                     2
#define NVML_TEMPERATURE_GPU               0  /* nvmlTemperatureSensors_t */
#define NVML_NVLINK_LINKS_MAX              18 /* NVML_NVLINK_MAX_LINKS */
#define NVML_PCI_BUS_ID_LEGACY_MAX         16 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
#define NVML_PCI_BUS_ID_MAX                32 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
#define NVML_ERROR_NOT_SUPPORTED           3
#define NVML_ERROR_CORRUPTED_INFOROM       14
#define NVML_ERROR_FUNCTION_NOT_FOUND      13
#define NVML_MEMORY_ERROR_TYPE_CORRECTED   0 /* nvmlMemoryErrorType_t */
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC                  0 /* nvmlEccCounterType_t */
#define NVML_AGGREGATE_ECC                 1
#define NVML_MEMORY_LOCATION_DRAM          2 /* nvmlMemoryLocation_t (also _DEVICE_MEMORY) */
#define NVML_MEMORY_LOCATION_SRAM          7
#define NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS                                  \
        0 /* nvmlPageRetirementCause_t                                                             \
           */
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION             230 /* a field id (nvmlDeviceGetFieldValues) */
/* nvmlDeviceGpuRecoveryAction_t, the value of that field. */
#define NVML_GPU_RECOVERY_ACTION_NONE            0
#define NVML_GPU_RECOVERY_ACTION_GPU_RESET       1
#define NVML_GPU_RECOVERY_ACTION_NODE_REBOOT     2
#define NVML_GPU_RECOVERY_ACTION_DRAIN_P2P       3
#define NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET 4
#define NVML_VALUE_TYPE_UNSIGNED_INT             1 /* nvmlValueType_t */
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG       3

typedef int nvml_return;                 /* nvmlReturn_t */
typedef struct nvml_device *nvml_device; /* nvmlDevice_t */

struct nvml_process_info { /* nvmlProcessInfo_t as the _v2 and _v3 calls fill it */
        unsigned int pid;
        unsigned long long used_gpu_memory;
        unsigned int gpu_instance_id, compute_instance_id;
};

typedef struct nvml_event_set *nvml_event_set; /* nvmlEventSet_t */
/* nvmlEventTypeXidCriticalError: every Xid, application ones too (its name says nothing of the
 * Xid's severity: the Xid table does). */
#define NVML_EVENT_TYPE_XID 0x0000000000000008ULL
#define NVML_ERROR_TIMEOUT  10
struct nvml_event_data { /* nvmlEventData_t */
        nvml_device device;
        unsigned long long event_type;
        unsigned long long event_data; /* the Xid */
        unsigned gpu_instance_id, compute_instance_id;
};
struct nvml_pci_info { /* nvmlPciInfo_t */
        char bus_id_legacy[NVML_PCI_BUS_ID_LEGACY_MAX];
        unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
        char bus_id[NVML_PCI_BUS_ID_MAX];
};

struct nvml_field_value { /* nvmlFieldValue_t */
        unsigned field_id, scope_id;
        long long timestamp, latency_usec;
        int value_type;     /* nvmlValueType_t */
        nvml_return status; /* this field's own answer */
        union {             /* nvmlValue_t */
                double d;
                unsigned ui;
                unsigned long ul;
                unsigned long long ull;
                long long sll;
                int si;
                unsigned short us;
        } value;
};

/* Every NVML entry point umd calls. The required ones are never NULL in a table nvml_open
 * returns; the optional ones (marked) are NULL where the driver lacks them. */
struct nvml_api {
        nvml_return (*init)(void);                /* nvmlInit_v2 (nvmlInit) */
        nvml_return (*shutdown)(void);            /* optional */
        const char *(*error_string)(nvml_return); /* optional: use nvml_strerror */
        nvml_return (*by_uuid)(const char *, nvml_device *);
        nvml_return (*by_bus)(const char *, nvml_device *); /* nvmlDeviceGetHandleByPciBusId_v2 */
        /* nvmlDeviceGetComputeRunningProcesses_v3 (_v2) */
        nvml_return (*processes)(nvml_device, unsigned *, struct nvml_process_info *);
        nvml_return (*compute_mode)(nvml_device, int *); /* optional */
        nvml_return (*cur_gen)(nvml_device, unsigned *); /* optional, and the four below */
        nvml_return (*cur_width)(nvml_device, unsigned *);
        nvml_return (*max_gen)(nvml_device, unsigned *);
        nvml_return (*max_width)(nvml_device, unsigned *);
        nvml_return (*replay)(nvml_device, unsigned *);
        nvml_return (*clock)(nvml_device, int, unsigned *); /* optional, and the four below */
        nvml_return (*max_clock)(nvml_device, int, unsigned *);
        nvml_return (*reasons)(nvml_device, unsigned long long *); /* clocks event reasons */
        nvml_return (*temperature)(nvml_device, int, unsigned *);
        nvml_return (*power)(nvml_device, unsigned *); /* milliwatts */
        nvml_return (*link_state)(nvml_device, unsigned, int *);
        nvml_return (*remote_pci)(nvml_device, unsigned, struct nvml_pci_info *); /* _v2 */
        /* The GPU's error state (common/nvml_errors.h), every one optional. */
        /* nvmlDeviceGetRemappedRows: corrected, uncorrected, is pending, failure occurred */
        nvml_return (*remapped_rows)(nvml_device, unsigned *, unsigned *, unsigned *, unsigned *);
        /* nvmlDeviceGetMemoryErrorCounter: error type, counter type, location */
        nvml_return (*memory_errors)(nvml_device, int, int, int, unsigned long long *);
        nvml_return (*ecc_mode)(nvml_device, int *, int *); /* current, pending */
        /* nvmlDeviceGetRetiredPages_v2 (nvmlDeviceGetRetiredPages): cause, count (in: room),
         * addresses; _v2's timestamps are passed NULL with the room 0 */
        nvml_return (*retired_pages)(nvml_device, int, unsigned *, unsigned long long *);
        nvml_return (*retired_pending)(nvml_device, int *);
        nvml_return (*field_values)(nvml_device, int, struct nvml_field_value *);
        nvml_return (*validate_inforom)(nvml_device);

        /* Links (issue 58, daemon/health_links.c): optional. */
        /* nvmlDeviceGetNvLinkErrorCounter(device, link, nvmlNvLinkErrorCounter_t, *value) */
        nvml_return (*nvlink_error)(nvml_device, unsigned, int, unsigned long long *);

        /* The Xid watch's events (daemon/xid_source.c), all optional: nvmlEventSetCreate,
         * nvmlDeviceRegisterEvents, nvmlEventSetWait_v2, nvmlEventSetFree. */
        nvml_return (*event_set_create)(nvml_event_set *);
        nvml_return (*register_events)(nvml_device, unsigned long long, nvml_event_set);
        nvml_return (*event_set_wait)(nvml_event_set, struct nvml_event_data *, unsigned);
        nvml_return (*event_set_free)(nvml_event_set);
};

/* nvmlNvLinkErrorCounter_t (issue 58) */
#define NVML_NVLINK_ERROR_DL_REPLAY   0
#define NVML_NVLINK_ERROR_DL_RECOVERY 1
#define NVML_NVLINK_ERROR_DL_CRC_FLIT 2

/* Load NVML and nvmlInit it, once for the process (pthread_once; later calls return the first
 * answer). 0 and the table, or -ENOENT (no library), -ENOTSUP (a required entry point missing)
 * or -EIO (nvmlInit failed) with *ret_why saying so in the one set of words every caller shows:
 * "NVML unavailable (libnvidia-ml.so.1: …)", "NVML too old (missing nvml…)", "NVML init failed:
 * …". The why is static. Outputs are untouched on the other side of each case. */
int nvml_open(const struct nvml_api **ret_api, const char **ret_why);

/* nvmlShutdown, once, if nvml_open succeeded; nvml_open then answers -ESHUTDOWN ("NVML shut
 * down"). The library stays mapped: NVML's threads may outlive a dlclose. */
void nvml_close(void);

/* NVML's words for r, or "error" where the library gives none. */
const char *nvml_strerror(nvml_return r);
