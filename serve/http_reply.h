/* The response of POST .../infer (http_infer.c reads the request): the outputs asked for, each as
 * JSON "data" or binary data after the JSON header, in Triton's form. */
#ifndef RS_SERVE_HTTP_REPLY_H
#define RS_SERVE_HTTP_REPLY_H

#include "http_internal.h"

/* y (one per config output, B samples) into r: want[k] says which outputs go back, binary[k] in which
 * form, classes[k] > 0 the classification extension's top-k instead of the values. req (borrowed)
 * gives the request's "id". */
void rs_serve_infer_reply(const rs_serve_model *m, const rs_serve_version *v, const json_t *req, int64_t B,
                          const rs_serve_tensor *y, const bool *want, const bool *binary, const int *classes,
                          rs_serve_reply *r);

#endif
