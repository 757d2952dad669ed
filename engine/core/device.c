/* Device names and the kernel-table registry (see device.h). */
#include "device.h"

const char *rs_device_name(rs_device d)
{
    switch (d.kind) {
    case RS_DEV_CPU: return "cpu";
    case RS_DEV_CUDA: return "cuda";
    default: return "?";
    }
}

const rs_kernels *rs_kernels_for(rs_device d)
{
    switch (d.kind) {
    case RS_DEV_CPU: return &rs_cpu_kernels;
    default: return NULL; /* the CUDA issue adds its table here */
    }
}
