/* The per-device kernel table. Layers, the executor and optimizers never compute directly: they call
 * through an rs_kernels table chosen by the device their buffers live on, passing an rs_kctx
 * (engine/core/device.h: threads, a stream, the first failure). The entries are declared once, in
 * engine/core/kernels.def, which every table and the harness expand (docs/add-a-kernel.md). Only the
 * files that call entries include this header; the rest of the engine needs device.h alone, so a new
 * entry recompiles the callers and the tables, not everything that names a context. The CPU table
 * (engine/cpu/) is the reference every other table is tested against (tests/engine/
 * test_kernel_harness.c); a device's table is added by filling the same struct, without touching any
 * layer or the executor.
 *
 * What every table guarantees (a new device's table must too; the harness checks the observable part):
 *  - Memory. Every array argument of an entry is device memory of the table's device: a block from
 *    its mem_alloc or any address inside one. The exceptions are named: the host side of copy_h2d /
 *    copy_d2h, and the small host structs and out-parameters (rs_conv_geom, size_t *bytes, void **out).
 *    On the CPU device memory is host memory, so any host pointer works there, and the CPU code of the
 *    engine passes its host buffers directly.
 *  - Allocation and the tracker. mem_alloc returns zero-filled memory aligned to 64 bytes or more and
 *    counts `bytes` in pool p of the rs_mem tracker it is given (NULL: uncounted); mem_free takes the
 *    same tracker, pool and size. A device table counts its allocations there exactly as the CPU's
 *    does (rs_mem_count), so the tracker stays the one source of every memory figure.
 *  - Ordering. Calls made on one context run in the order they were made: a device queues them on
 *    ctx->stream, the CPU runs each before returning. copy_h2d and copy_d2h return when the copy is
 *    complete (the host buffer may be reused or read at once); other entries may return earlier on a
 *    device with a queue, and sync(ctx) returns when everything issued on ctx has finished. Calls on
 *    different contexts are unordered with respect to each other.
 *  - Status. Every entry takes the context first and returns RS_OK or an error; a failing entry also
 *    records the failure in the context (rs_kctx_fail), and the first one recorded is kept until
 *    rs_kctx_check takes it (sticky, as CUDA's errors are). A device that learns of a failure late (an
 *    asynchronous launch) returns it from a later call or from sync. The CPU fails on bad arguments:
 *    negative sizes, NULL arrays that are not optional, a workspace smaller than its query said,
 *    overlapping copies, an uninitialised context. On a failure outputs are unspecified.
 *  - Threads. ctx->threads is the number of host threads one call may use. Each call runs with its own
 *    context's count whatever other threads of the process do with theirs (engine/cpu/cpu_scope.h
 *    says how the CPU keeps OpenMP and OpenBLAS to it). A device without host threads ignores it.
 *
 * Conventions for the compute entries: f32, row-major. Forward entries overwrite their outputs.
 * Backward entries OVERWRITE the input gradient (din) and ACCUMULATE (+=) into parameter gradients,
 * so gradient accumulation over micro-steps is free and zeroing parameter gradients is one explicit
 * step. Optional pointers (may be NULL) are marked where they are. */
#ifndef RS_KERNELS_H
#define RS_KERNELS_H

#include "engine/core/device.h"

struct rs_kernels {
    const char *name;          /* "cpu", "cuda", "guard" */
    rs_device_kind kind;
    /* Every member from here on is an entry of kernels.def: required, context first, returns
     * rs_status. The harness has one case per entry (a new entry without one does not link). */
#define RS_KERNEL(name, params, args) rs_status(*name) params;
#include "engine/core/kernels.def"
};

/* The number of entries, for code that walks a table's members (the harness). */
#define RS_KERNEL(name, params, args) +1
enum { RS_KERNEL_COUNT = 0
#include "engine/core/kernels.def"
};

/* The table for a device, or NULL when this build has no kernels for it. */
const rs_kernels *rs_kernels_for(rs_device d);

/* The tables, static const structs: the CPU's (engine/cpu/kernels.c), the guard test device's
 * (engine/guard/guard_table.c) and, in builds with CUDA only, the CUDA one (engine/cuda/cuda_table.c).
 * Declared here, where rs_kernels_for (engine/core/device.c) registers them, so that core includes
 * none of the folders that define them. */
extern const rs_kernels rs_cpu_kernels;
extern const rs_kernels rs_guard_kernels;
extern const rs_kernels rs_cuda_kernels;

/* Returns from the enclosing function when call returns an error (its status). */
#define RS_KTRY(call)                                                                                  \
    do {                                                                                               \
        rs_status rs_ktry_ = (call);                                                                   \
        if (rs_ktry_ != RS_OK) return rs_ktry_;                                                        \
    } while (0)

#endif
