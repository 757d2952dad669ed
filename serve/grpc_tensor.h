/* A gRPC request's input tensor as bytes in the wire's layout (dtype.h): from raw_input_contents, or
 * from the typed InferTensorContents field dtype.c's table names for its type (narrowed to the type
 * with a range check: a value that does not fit is refused, never wrapped). */
#ifndef RS_SERVE_GRPC_TENSOR_H
#define RS_SERVE_GRPC_TENSOR_H

#include "grpc_internal.h"

/* Input i (t) of count elements into x (x->data malloc'd, the caller's); raw: its raw_input_contents
 * entry or NULL. */
rs_grpc_code rs_grpc_read_input(const rs_serve_config *c, int i, const Inference__ModelInferRequest__InferInputTensor *t,
                                const ProtobufCBinaryData *raw, size_t count, rs_serve_tensor *x, char *msg, size_t n);

#endif
