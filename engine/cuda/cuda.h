/* What every build knows about CUDA, with or without the toolkit: whether this build has the CUDA
 * table, how many GPUs the driver reports and what they are (torch.cuda.is_available(),
 * device_count(), get_device_properties()). engine/cuda/cuda_query.c answers from the CUDA runtime;
 * engine/cuda/cuda_absent.c, built where nvcc was not found, answers that this build has none. */
#ifndef RS_CUDA_H
#define RS_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/core/status.h"

typedef struct rs_cuda_info {
    bool built;          /* this build has the CUDA table */
    int count;           /* GPUs the driver reports (0 when none, or no driver) */
    int driver_version;  /* e.g. 13000 for 13.0; 0 when there is no driver */
    int runtime_version; /* the CUDA runtime this build links; 0 when not built */
    char why[256];       /* when count is 0: why ("no CUDA device: ...") */
} rs_cuda_info;

typedef struct rs_cuda_gpu {
    char name[256];
    int cc_major, cc_minor; /* compute capability (9.0 for H100) */
    int sms;                /* streaming multiprocessors */
    size_t total_bytes, free_bytes;
} rs_cuda_gpu;

/* Fills *info; never fails for lack of a GPU (count is 0 and why says so). */
void rs_cuda_query(rs_cuda_info *info);
/* The properties of GPU `index` (0 <= index < count). */
rs_status rs_cuda_gpu_info(int index, rs_cuda_gpu *gpu, rs_err *err);
/* Makes GPU `index` the calling thread's current device, which the CUDA table's calls run on. */
rs_status rs_cuda_use(int index, rs_err *err);

#endif
