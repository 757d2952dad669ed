/* The CPU kernel functions behind rs_cpu_kernels (engine/cpu/kernels.c assembles the table): one
 * rs_cpu_<name> per entry of engine/core/kernels.def, with that entry's parameters and contract.
 * Exposed so tests and benches can call one kernel directly; everything else goes through the table. */
#ifndef RS_CPU_KERNELS_H
#define RS_CPU_KERNELS_H

#include "engine/core/kernels.h"

#define RS_KERNEL(name, params, args) rs_status rs_cpu_##name params;
#include "engine/core/kernels.def"

#endif
