/* A request's tensors against the model's config (infer_check.h), for both front ends; the messages
 * are Triton's, so a client that matches on them reads the same text. */
#include "infer_check.h"

#include <stdio.h>
#include <string.h>

#define RS_SERVE_UNBATCHED_MAX ((int64_t)1 << 20)

int64_t rs_serve_max_request_batch(const rs_serve_config *c)
{
    if (c->max_batch_size > 0) return c->max_batch_size;
    if (c->full_dims && c->ninputs && c->inputs[0].dims[0] > 0) return c->inputs[0].dims[0];
    return RS_SERVE_UNBATCHED_MAX;
}

size_t rs_serve_io_numel(const rs_serve_config *c, const rs_serve_io *io)
{
    size_t n = 1;
    for (int d = c->full_dims ? 1 : 0; d < io->rank; d++) n *= (size_t)(io->dims[d] > 0 ? io->dims[d] : 1);
    return n;
}

static int find(const rs_serve_io *io, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(io[i].name, name)) return i;
    return -1;
}

int rs_serve_input_index(const rs_serve_config *c, const char *name, char *msg, size_t n)
{
    int i = find(c->inputs, c->ninputs, name);
    if (i < 0) snprintf(msg, n, "unexpected inference input '%.100s' for model '%s'", name ? name : "", c->name);
    return i;
}

int rs_serve_output_index(const rs_serve_config *c, const char *name, char *msg, size_t n)
{
    int i = find(c->outputs, c->noutputs, name);
    if (i < 0) snprintf(msg, n, "unexpected inference output '%.100s' for model '%s'", name ? name : "", c->name);
    return i;
}

static void dims_text(const int64_t *d, size_t rank, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < rank && k + 24 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)d[i]);
    if (k + 24 >= cap) k += (size_t)snprintf(buf + k, cap - k, ",...");
    snprintf(buf + k, cap - k, "]");
}

size_t rs_serve_request_shape(const rs_serve_config *c, const rs_serve_io *io, int64_t *w)
{
    size_t r = 0;
    if (!c->full_dims) w[r++] = -1;
    for (int d = 0; d < io->rank; d++) w[r++] = io->dims[d];
    return r;
}

bool rs_serve_check_input(const rs_serve_config *c, int i, const char *datatype, const int64_t *shape, size_t rank,
                          int64_t *B, size_t *count, char *msg, size_t n)
{
    const rs_serve_io *io = &c->inputs[i];
    if (!datatype || rs_serve_dtype_from_v2(datatype) != io->dtype) {
        snprintf(msg, n, "inference input '%s' data-type is '%.20s', but model '%s' expects '%s'", io->name,
                 datatype ? datatype : "", c->name, rs_serve_dtype_v2_name(io->dtype));
        return false;
    }
    if (rank == 0 && !c->full_dims) {
        snprintf(msg, n, "input '%s' has no shape but model requires batch dimension for '%s'", io->name, c->name);
        return false;
    }
    int64_t want[RS_SERVE_MAX_DIMS + 1];
    size_t wr = rs_serve_request_shape(c, io, want);
    bool ok = rank == wr;
    for (size_t d = 0; ok && d < rank; d++) ok = shape[d] >= 0 && (want[d] == -1 || shape[d] == want[d]);
    if (!ok) {
        char w[160], g[160];
        dims_text(want, wr, w, sizeof w);
        dims_text(shape, rank, g, sizeof g);
        snprintf(msg, n, "unexpected shape for input '%s' for model '%s'. Expected %s, got %s.%s", io->name, c->name, w,
                 g, c->max_batch_size > 0 ? " NOTE: Setting a non-zero max_batch_size in the model config requires a "
                 "batch dimension to be prepended to each input shape." : "");
        return false;
    }
    int64_t b = shape[0];
    if (*B && b != *B) {
        snprintf(msg, n, "input '%s' batch size does not match other inputs for '%s'", io->name, c->name);
        return false;
    }
    if (b < 1 || b > rs_serve_max_request_batch(c)) {
        if (c->max_batch_size > 0)
            snprintf(msg, n, "inference request batch-size must be <= %d for '%s'", c->max_batch_size, c->name);
        else
            snprintf(msg, n, "input '%s' for model '%s': a batch of %lld samples (1..%lld)", io->name, c->name,
                     (long long)b, (long long)rs_serve_max_request_batch(c));
        return false;
    }
    *B = b;
    *count = (size_t)b * rs_serve_io_numel(c, io);
    return true;
}

bool rs_serve_check_given(const rs_serve_config *c, const int *given, size_t got, char *msg, size_t n)
{
    int want = 0, most = 0; /* the control inputs of a sequence batcher are the server's to fill */
    for (int i = 0; i < c->ninputs; i++) {
        if (c->inputs[i].control && given[i]) {
            snprintf(msg, n, "input '%s' of model '%s' is a sequence control input: the server fills it from the "
                     "request's sequence_id, sequence_start and sequence_end", c->inputs[i].name, c->name);
            return false;
        }
        want += !c->inputs[i].control && !c->inputs[i].optional;
        most += !c->inputs[i].control;
    }
    bool ok = got >= (size_t)want && got <= (size_t)most;
    for (int i = 0; i < c->ninputs; i++)
        ok = ok && (given[i] == 1 || c->inputs[i].control || (c->inputs[i].optional && !given[i]));
    if (ok && !got) /* every input optional and none sent: nothing states the batch */
        snprintf(msg, n, "the request gives no input for model '%s': send at least one (every input is optional, "
                 "but the inputs state the batch)", c->name);
    if (ok) return got > 0;
    char missing[400] = "", have[400] = "";
    size_t km = 0, kh = 0;
    for (int i = 0; i < c->ninputs; i++) {
        if (c->inputs[i].control) continue;
        if (!given[i] && !c->inputs[i].optional && km < sizeof missing)
            km += (size_t)snprintf(missing + km, sizeof missing - km, "%s'%s'", km ? "," : "", c->inputs[i].name);
        if (given[i] && kh < sizeof have)
            kh += (size_t)snprintf(have + kh, sizeof have - kh, "%s'%s'", kh ? "," : "", c->inputs[i].name);
    }
    for (int i = 0; i < c->ninputs; i++)
        if (given[i] > 1) {
            snprintf(msg, n, "input '%s' is given %d times for model '%s'", c->inputs[i].name, given[i], c->name);
            return false;
        }
    /* Triton words the count as a range once any input is optional (core infer_request.cc) */
    char count[80];
    if (want == most) snprintf(count, sizeof count, "expected %d inputs", want);
    else snprintf(count, sizeof count, "expected number of inputs between %d and %d", want, most);
    snprintf(msg, n, "%s but got %zu inputs for model '%s'. Got input(s) [%s], but missing required input(s) [%s]. "
             "Please provide all required input(s).", count, got, c->name, have, missing);
    return false;
}

bool rs_serve_check_data(const char *model, const rs_serve_io *io, const void *p, size_t bytes, size_t count,
                         char *msg, size_t n)
{
    if (io->dtype != RS_SERVE_STRING) {
        size_t want = rs_serve_dtype_bytes(io->dtype, count);
        if (bytes == want) return true;
        snprintf(msg, n, "input byte size mismatch for input '%s' for model '%s'. Expected %zu, got %zu", io->name,
                 model, want, bytes);
        return false;
    }
    size_t elems, span = rs_serve_bytes_span(p, bytes, count, &elems);
    if (span == bytes) return true;
    if (elems > count)
        snprintf(msg, n, "unexpected number of string elements %zu for inference input '%s' for model '%s', "
                 "expecting %zu", elems, io->name, model, count);
    else
        snprintf(msg, n, "expected %zu string elements for inference input '%s' for model '%s', got %zu", count,
                 io->name, model, elems);
    return false;
}

int rs_serve_output_shape(const rs_serve_config *c, int k, int64_t B, int64_t *shape)
{
    const rs_serve_io *io = &c->outputs[k];
    int r = 0;
    shape[r++] = B;
    for (int d = c->full_dims ? 1 : 0; d < io->rank; d++) shape[r++] = io->dims[d];
    return r;
}
