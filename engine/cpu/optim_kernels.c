/* Optimizer updates on the CPU over a flat slice (see the contract in engine/core/kernels.def).
 * The arithmetic follows torch.optim's single-tensor path operation for operation, so a step here and
 * a step there differ only by float rounding. */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"

#define PAR_MIN 32768 /* below this a parallel region costs more than it saves */

rs_status rs_cpu_sgd_update(rs_kctx *ctx, float *p, const float *g, float *mom, size_t n, float lr, float momentum,
                            float dampening, float wd, bool nesterov, bool first_step)
{
    CPU_CTX(ctx, "sgd_update");
    CPU_PTR(ctx, "sgd_update", p, n);
    CPU_PTR(ctx, "sgd_update", g, n);
    CPU_PTR(ctx, "sgd_update", mom, n && momentum != 0.0f);
    int prev = cpu_enter(ctx);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0.0f) d += wd * p[i];
        if (momentum != 0.0f) {
            float b = first_step ? d : momentum * mom[i] + (1.0f - dampening) * d;
            mom[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

rs_status rs_cpu_adam_update(rs_kctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                             float b2, float eps, float wd, bool decoupled, int64_t t)
{
    CPU_CTX(ctx, "adam_update");
    CPU_PTR(ctx, "adam_update", p, n);
    CPU_PTR(ctx, "adam_update", g, n);
    CPU_PTR(ctx, "adam_update", m, n);
    CPU_PTR(ctx, "adam_update", v, n);
    if (t < 1) return rs_kctx_fail(ctx, RS_ERR_ARG, "adam_update: step t=%lld; Adam counts steps from 1", (long long)t);
    int prev = cpu_enter(ctx);
    /* Scalars in double, rounded once, as torch forms them from Python floats: in float,
     * 1 - 0.999f^t cancels about four digits for small t (a 3e-6 error in the step at t = 2). */
    const double bc1 = 1.0 - pow((double)b1, (double)t);
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)b2, (double)t));
    const float step_size = (float)((double)lr / bc1);
    const float decay = (float)(1.0 - (double)lr * (double)wd);
    #pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        if (decoupled) p[i] *= decay;
        else if (wd != 0.0f) gi += wd * p[i];
        m[i] += (1.0f - b1) * (gi - m[i]);           /* torch: exp_avg.lerp_(grad, 1-beta1) */
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * m[i] / denom;
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}
