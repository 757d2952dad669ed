/* rs_vexpf (engine/cpu/vmath.h) at its edges, in the loop form the kernels vectorize: NaN gives NaN
 * and never reaches the (int32_t) conversion (built with -fsanitize=float-cast-overflow, which
 * -fsanitize=undefined leaves out in GCC: a NaN converted aborts this test); +-inf and values past
 * the clamps give e^88 and 0; ordinary values stay within 2 ulp of glibc's expf. */
#include <math.h>
#include <stdio.h>

#include "engine/cpu/vmath.h"
#include "rs_test.h"

#define N 67

static void vexp(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++) y[i] = rs_vexpf(x[i]);
}

int main(void)
{
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = -90.0f + 2.7f * (float)i; /* -90 .. 88.2 */
    x[3] = NAN;
    x[40] = -NAN;
    x[41] = INFINITY;
    x[42] = -INFINITY;
    vexp(x, y, N);
    RS_CHECK(isnan(y[3]) && isnan(y[40]), "NaN in, %g and %g out", (double)y[3], (double)y[40]);
    RS_CHECK(y[41] == rs_vexpf(88.0f) && isfinite(y[41]), "exp(+inf) gave %g, not e^88", (double)y[41]);
    RS_CHECK(y[42] == 0.0f, "exp(-inf) gave %g", (double)y[42]);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (i == 3 || (i >= 40 && i <= 42)) continue;
        float want = x[i] < -87.0f ? 0.0f : x[i] > 88.0f ? expf(88.0f) : expf(x[i]);
        if (!(fabsf(y[i] - want) <= 2.5f * (nextafterf(want, INFINITY) - want))) {
            if (bad++ < 3) printf("  exp(%g) = %.9g, expf %.9g\n", (double)x[i], (double)y[i], (double)want);
        }
    }
    RS_CHECK(bad == 0, "%d values beyond 2 ulp of expf", bad);
    /* the NaNs did not disturb their neighbours in the same vector */
    RS_CHECK(fabsf(y[4] - expf(x[4])) <= 2.5f * (nextafterf(expf(x[4]), INFINITY) - expf(x[4])), "neighbour of NaN");
    return rs_test_finish("vexpf");
}
