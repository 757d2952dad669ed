/* The CPU kernel table: the reference implementation every other device is tested against. Its
 * entries are kernels.def's, each rs_cpu_<name>; one missing is an undefined reference at link. */
#include "cpu_kernels.h"

const rs_kernels rs_cpu_kernels = {
    .name = "cpu",
    .kind = RS_DEV_CPU,
#define RS_KERNEL(name, params, args) .name = rs_cpu_##name,
#include "engine/core/kernels.def"
};
