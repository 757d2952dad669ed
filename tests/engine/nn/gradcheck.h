/* Finite-difference checking of one layer, used by test_gradcheck.c.
 * The scalar checked is L = sum(out * R) for a fixed random R, so dL/dout = R exercises every output
 * element with a different weight. Central differences are taken in double on the loss, with float
 * kernels underneath; tolerances are stated at the call site. */
#ifndef RS_GRADCHECK_H
#define RS_GRADCHECK_H

#include "engine/nn/layer.h"

typedef struct gc_result {
    double max_abs_err, max_rel_err;
    int checked, failed;
} gc_result;

/* Checks input and parameter gradients of a layer built from cfg on input shape `in`, batch B.
 * input_gap > 0 keeps inputs at least that far from 0 and from each other within pooling windows
 * (kinks of ReLU and max). Prints the worst pairs. */
gc_result gc_check_layer(const char *what, const rs_layer_cfg *cfg, const rs_shape *in, int B, bool training,
                         double eps, double atol, double rtol, uint64_t seed);

#endif
