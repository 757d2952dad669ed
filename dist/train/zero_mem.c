/* The ZeRO paper's memory formula (Rajbhandari et al., 2020, section 5), in f32: what the memory table
 * prints beside each rank's measured bytes. */
#include "dtrain.h"

rs_zero_bytes rs_zero_mem_formula(size_t params, int world, int zero, int opt_states)
{
    double p = 4.0 * (double)params, n = world > 0 ? world : 1;
    rs_zero_bytes b = {.params = p, .grads = p, .optim = p * opt_states};
    if (zero >= 1) b.optim /= n;
    if (zero >= 2) b.grads /= n;
    if (zero >= 3) b.params /= n;
    return b;
}
