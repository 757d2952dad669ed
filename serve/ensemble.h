/* Triton's ensembles: platform "ensemble" with ensemble_scheduling steps (a preprocessing model feeding
 * a classifier, say). The ensemble is served as a backend whose run calls each step's model through
 * that model's own scheduler, by name, as the server holds it now; the tensors pass between steps by
 * the names the steps' input_map and output_map give them. */
#ifndef RS_SERVE_ENSEMBLE_H
#define RS_SERVE_ENSEMBLE_H

#include "server.h"

/* The ensemble c (its steps, inputs and outputs) of server s (borrowed: it outlives the model) as a
 * backend. The step models are looked up at each run, so they may load after it. Caller owns *out. */
rs_status rs_serve_ensemble_new(rs_serve_server *s, const rs_serve_config *c, rs_serve_backend **out, rs_err *err);

#endif
