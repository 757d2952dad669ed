/* The CPU kernel functions behind rs_cpu_kernels (engine/cpu/kernels.c assembles the table).
 * Exposed so tests can call one kernel directly; everything else goes through the table. */
#ifndef RS_CPU_KERNELS_H
#define RS_CPU_KERNELS_H

#include "engine/core/device.h"

void rs_cpu_sgd_update(float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                       float dampening, float wd, bool nesterov, bool first_step);
void rs_cpu_adam_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                        float b2, float eps, float wd, bool decoupled, int64_t t);

#endif
