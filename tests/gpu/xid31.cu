// The one fault the GPU suite raises on purpose: a kernel stores to an address no allocation
// owns, which the driver reports as Xid 31 (an MMU fault, application-level: the process's
// context is lost, the GPU is fine). gpu_suite.py's `xid` test runs it and checks that umd's Xid
// watch saw it, on this GPU, with this pid, and failed nothing.
//
//   xid31 [--device N]   prints "pid=PID bus=PCI_BUS_ID", faults, and exits 0 when CUDA
//                        answered the launch with an illegal address (the fault happened), 1
//                        otherwise, 77 without a GPU.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A canonical address far above any allocation: the store faults on a page no mapping holds.
#define XID31_BAD_ADDRESS 0x7fff00000000ull
#define XID31_BUS_MAX     32

__global__ void store_to_invalid(int *p)
{
        *p = 1;
}

int main(int argc, char **argv)
{
        int dev = 0, count = 0;
        char bus[XID31_BUS_MAX] = "";

        if (argc == 3 && strcmp(argv[1], "--device") == 0)
                dev = atoi(argv[2]);
        if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
                printf("no GPU\n");
                return 77;
        }
        if (cudaSetDevice(dev) != cudaSuccess || cudaFree(0) != cudaSuccess ||
            cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess) {
                fprintf(stderr, "xid31: cannot use device %d\n", dev);
                return 1;
        }
        printf("pid=%d bus=%s\n", (int)getpid(), bus);
        fflush(stdout);
        store_to_invalid<<<1, 1>>>((int *)XID31_BAD_ADDRESS);
        cudaError_t e = cudaDeviceSynchronize();
        printf("cuda: %s\n", cudaGetErrorName(e));
        return e == cudaErrorIllegalAddress ? 0 : 1;
}
