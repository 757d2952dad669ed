/* The ranks backend: a model served across rank processes (ranks.h), behind the same table as the
 * others. It is never probed from a file: rs_serve_backend_use_ranks wraps a loaded backend (the
 * inner one, which still describes the tensors) and from then on every run, and a GPT's generation
 * (one full forward per token), goes through the ranks, one batch at a time. */
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"

typedef struct ranked {
    rs_serve_backend inner; /* owned: the model as loaded (its ops, impl and path moved here) */
    rs_serve_ranks *ranks;  /* owned: the rank processes that run it */
} ranked;

static void ranks_free(void *impl)
{
    ranked *r = impl;
    if (!r) return;
    rs_serve_ranks_stop(r->ranks); /* before the model the ranks were cut from */
    r->inner.ops->free(r->inner.impl);
    free(r->inner.path);
    free(r);
}

static void ranks_io(const void *impl, rs_serve_ios *io)
{
    const ranked *r = impl;
    r->inner.ops->io(r->inner.impl, io);
}

static rs_status ranks_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    const ranked *r = impl;
    return r->inner.ops->complete(r->inner.impl, c, where, err);
}

/* The ranks hold the activations: an instance holds nothing. */
static rs_status ranks_new_instance(void *impl, int max_batch, void **inst, rs_err *err)
{
    (void)impl, (void)max_batch, (void)inst, (void)err;
    return RS_OK;
}

/* The rank job takes one FP32 input and gives one FP32 output (rs_srv_ranks_wrap refuses others). */
static rs_status ranks_run(void *impl, void *inst, const rs_serve_tensor *x, int B, rs_serve_tensor *y, rs_err *err)
{
    (void)inst;
    ranked *r = impl;
    rs_serve_ios io = {0};
    r->inner.ops->io(r->inner.impl, &io);
    size_t n = (size_t)B;
    for (int d = 0; d < io.out[0].rank; d++) n *= (size_t)io.out[0].dims[d];
    y[0].bytes = n * sizeof(float);
    y[0].data = malloc(y[0].bytes + 1); /* the caller's */
    if (!y[0].data) return rs_err_set(err, RS_ERR_NOMEM, "out of memory for %zu output values", n);
    rs_status st = rs_serve_ranks_run(r->ranks, x[0].data, B, y[0].data, err);
    if (st) {
        free(y[0].data);
        y[0].data = NULL;
    }
    return st;
}

static rs_status forward(void *ud, const int32_t *ids, float *y, rs_err *err)
{
    return rs_serve_ranks_run(ud, ids, 1, y, err);
}

static rs_status ranks_generate(void *impl, void *inst, rs_serve_gen *g, rs_err *err)
{
    (void)inst;
    ranked *r = impl;
    return r->inner.ops->generate_with(r->inner.impl, g, forward, r->ranks, err);
}

static int ranks_max_batch(const void *impl)
{
    const ranked *r = impl;
    return r->inner.ops->max_batch ? r->inner.ops->max_batch(r->inner.impl) : 0;
}

static struct rs_model *ranks_model(void *impl)
{
    ranked *r = impl;
    return r->inner.ops->model ? r->inner.ops->model(r->inner.impl) : NULL;
}

static void ranks_describe(void *impl, char *buf, size_t cap) { rs_serve_ranks_describe(((ranked *)impl)->ranks, buf, cap); }

/* Two tables, so that generating stays a property of the table (rs_serve_backend_generates): the
 * second for a model that generates. */
static const rs_srv_backend_ops ranks_tensors = {
    .name = "ranks",
    .what = "a model across ranks",
    .free = ranks_free,
    .io = ranks_io,
    .complete = ranks_complete,
    .new_instance = ranks_new_instance,
    .run = ranks_run,
    .max_batch = ranks_max_batch,
    .model = ranks_model,
    .describe = ranks_describe,
};
static const rs_srv_backend_ops ranks_text = {
    .name = "ranks",
    .what = "a model across ranks",
    .free = ranks_free,
    .io = ranks_io,
    .complete = ranks_complete,
    .new_instance = ranks_new_instance,
    .generate = ranks_generate,
    .max_batch = ranks_max_batch,
    .model = ranks_model,
    .describe = ranks_describe,
};

rs_status rs_srv_ranks_wrap(rs_serve_backend *b, rs_serve_ranks_cfg *c, rs_err *err)
{
    bool gen = b->ops->generate != NULL;
    rs_serve_ios io = {0};
    b->ops->io(b->impl, &io);
    if (!gen && (io.nin != 1 || io.nout != 1 || io.in[0].dtype != RS_SERVE_FP32 || io.out[0].dtype != RS_SERVE_FP32))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: across ranks a model takes one FP32 input and gives one FP32 "
                          "output; this one has %d inputs and %d outputs: serve it with ranks=1", b->path, io.nin,
                          io.nout);
    if (gen && !b->ops->generate_with)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s cannot generate across ranks", b->path, b->ops->what);
    ranked *r = calloc(1, sizeof *r); /* b's: ranks_free */
    char *path = r ? strdup(b->path) : NULL; /* b keeps its own: c->model points to it */
    if (!path) {
        free(r);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    rs_status st = rs_serve_ranks_start(c, &r->ranks, err);
    if (st) {
        free(path);
        free(r);
        return st;
    }
    r->inner = (rs_serve_backend){.ops = b->ops, .impl = b->impl, .path = path};
    b->ops = gen ? &ranks_text : &ranks_tensors;
    b->impl = r;
    return RS_OK;
}

bool rs_serve_backend_alive(const rs_serve_backend *b, char *why, size_t cap)
{
    if (b->ops != &ranks_tensors && b->ops != &ranks_text) return true;
    return rs_serve_ranks_alive(((const ranked *)b->impl)->ranks, why, cap);
}
