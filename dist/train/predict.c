/* The ZeRO paper's memory formula (Rajbhandari et al., 2020, section 5), in f32. */
#include "dtrain.h"

rs_dtrain_cfg rs_dtrain_defaults(void)
{
    return (rs_dtrain_cfg){.zero = 0, .bucket_bytes = 25u << 20, .overlap = true, .offload = false};
}

rs_zero_bytes rs_zero_predict(size_t params, int world, int zero, int opt_states)
{
    double p = 4.0 * (double)params, n = world > 0 ? world : 1;
    rs_zero_bytes b = {.params = p, .grads = p, .optim = p * opt_states};
    if (zero >= 1) b.optim /= n;
    if (zero >= 2) b.grads /= n;
    if (zero >= 3) b.params /= n;
    return b;
}
