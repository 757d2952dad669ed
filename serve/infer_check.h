/* A request's tensors checked against the model's config, the same for HTTP and gRPC, in Triton's
 * words (its core's infer_request.cc): which input a name is, its data type, its shape (batch first
 * when max_batch_size > 0; the config's full dims when max_batch_size is 0 and the config writes the
 * batch in them; else ringside's [N, dims...]), the same batch for every input, every required input given,
 * and the bytes the data holds. Each call returns false with msg set (n bytes) when the request is
 * wrong. */
#ifndef RS_SERVE_INFER_CHECK_H
#define RS_SERVE_INFER_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The shape a request gives tensor io (an input or output of c), -1 where any size goes: the batch (-1)
 * then the dims, or the config's dims themselves when they hold the batch (full_dims). This is the
 * shape model metadata states over HTTP and gRPC: Triton's [-1, dims...] when max_batch_size > 0,
 * its dims when max_batch_size is 0; and ringside's form (max_batch_size 0, dims per sample, the
 * form of a model served without a config) takes a batch first too, so it has the -1 as well.
 * shape holds RS_SERVE_MAX_DIMS + 1; returns the rank. */
size_t rs_serve_request_shape(const rs_serve_config *c, const rs_serve_io *io, int64_t *shape);
/* The largest batch a request may carry (max_batch_size, or a bound that keeps sizes from overflowing
 * for a model without one). */
int64_t rs_serve_max_request_batch(const rs_serve_config *c);
/* Elements per sample of config input (out: output) i, without the batch. */
size_t rs_serve_io_numel(const rs_serve_config *c, const rs_serve_io *io);

/* The config input named name: its index, or -1 ("unexpected inference input"). */
int rs_serve_input_index(const rs_serve_config *c, const char *name, char *msg, size_t n);
int rs_serve_output_index(const rs_serve_config *c, const char *name, char *msg, size_t n);
/* Input i's datatype and shape; *B is the batch the inputs before it set (0: none yet) and gets this
 * one's; *count gets the request's elements of it. */
bool rs_serve_check_input(const rs_serve_config *c, int i, const char *datatype, const int64_t *shape, size_t rank,
                          int64_t *B, size_t *count, char *msg, size_t n);
/* Every required config input given exactly once, an optional one at most once: given[i] is how many
 * times input i came; got the inputs' number in the request. */
bool rs_serve_check_given(const rs_serve_config *c, const int *given, size_t got, char *msg, size_t n);
/* The data of tensor io of model `model` holds count elements: its byte size for fixed-size types;
 * for BYTES, count serialized elements and nothing after them. */
bool rs_serve_check_data(const char *model, const rs_serve_io *io, const void *p, size_t bytes, size_t count,
                         char *msg, size_t n);
/* The shape of output k of B samples, as a reply states it: [B, dims...], or the config's full dims
 * with B first for a config that writes the batch in them. Returns the rank. */
int rs_serve_output_shape(const rs_serve_config *c, int k, int64_t B, int64_t *shape);

#endif
