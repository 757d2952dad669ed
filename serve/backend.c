/* backend.h's calls, dispatched through the backend's table of functions (backend_ops.h): the one
 * probe list of the backends a version folder can hold, and what every backend shares (a config's
 * checks that do not depend on the kind, the tensor completion of the tensor backends). */
#include "backend_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/generate.h"

const rs_srv_backend_ops *const rs_srv_backends[] = {&rs_srv_backend_engine, &rs_srv_backend_cast,
                                                      &rs_srv_backend_plan, &rs_srv_backend_gpt, NULL};

struct rs_serve_inst {
    rs_serve_backend *b; /* borrowed */
    void *impl;          /* owned: ops->free_instance */
};

static bool serves(const rs_srv_backend_ops *o, const char *path)
{
    size_t pn = strlen(path);
    const char *ext = strrchr(o->file, '.');
    size_t en = strlen(ext);
    return pn > en && !strcmp(path + pn - en, ext);
}

const rs_srv_backend_ops *rs_srv_backend_for_path(const char *path)
{
    for (const rs_srv_backend_ops *const *o = rs_srv_backends; *o; o++)
        if (serves(*o, path)) return *o;
    return rs_srv_backends[0];
}

rs_status rs_serve_backend_load(const char *path, rs_serve_backend **out, rs_err *err)
{
    *out = NULL;
    rs_serve_backend *b = calloc(1, sizeof *b); /* the caller's */
    if (!b || !(b->path = strdup(path))) {
        free(b);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    /* The backends for the file's extension in the list's order: the first that takes it serves it;
     * when none does, the first one's reason is the one given (the engine's, for an ONNX file). */
    b->ops = rs_srv_backend_for_path(path);
    rs_status st = b->ops->load(path, &b->impl, err);
    for (const rs_srv_backend_ops *const *o = rs_srv_backends; st && *o; o++) {
        if (*o == b->ops || !serves(*o, path)) continue;
        rs_err other = {0};
        if (!(*o)->load(path, &b->impl, &other)) {
            b->ops = *o;
            st = RS_OK;
        }
    }
    if (st) {
        free(b->path);
        free(b);
        return st;
    }
    *out = b;
    return RS_OK;
}

void rs_serve_backend_free(rs_serve_backend *b)
{
    if (!b) return;
    b->ops->free(b->impl);
    free(b->path);
    free(b);
}

void rs_serve_backend_ios(const rs_serve_backend *b, rs_serve_ios *io)
{
    memset(io, 0, sizeof *io);
    b->ops->io(b->impl, io);
}

void rs_serve_backend_io(const rs_serve_backend *b, rs_serve_io *in, rs_serve_io *out)
{
    rs_serve_ios io;
    rs_serve_backend_ios(b, &io);
    *in = io.in[0];
    *out = io.out[0];
}

const char *rs_serve_backend_kind(const rs_serve_backend *b) { return b->ops->name; }
bool rs_serve_backend_generates(const rs_serve_backend *b) { return b->ops->generate != NULL; }
int rs_serve_backend_max_batch(const rs_serve_backend *b) { return b->ops->max_batch ? b->ops->max_batch(b->impl) : 0; }
struct rs_model *rs_serve_backend_model(rs_serve_backend *b) { return b->ops->model ? b->ops->model(b->impl) : NULL; }

static bool says(const rs_serve_config *c, const char *platform)
{
    return !strcmp(c->platform, platform) || !strcmp(c->backend, platform);
}

/* What the config names against what the folder holds, before the backend checks the rest. Triton's
 * "tensorrt_plan" names a TensorRT engine, which this server cannot run, so it is refused by name
 * rather than taken as meaning a ringside plan. */
static rs_status check_names(const rs_serve_backend *b, const rs_serve_config *c, const char *where, rs_err *err)
{
    if (!strcmp(c->platform, "tensorrt_plan") || !strcmp(c->backend, "tensorrt"))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: the config says %s \"%s\" (a TensorRT engine, which ringside "
                          "does not run); a model.plan written by `compile` is platform: \"ringside_plan\"", where,
                          c->platform[0] ? "platform" : "backend", c->platform[0] ? c->platform : c->backend);
    for (const rs_srv_backend_ops *const *o = rs_srv_backends; *o; o++)
        if (*o != b->ops && (*o)->platform && says(c, (*o)->platform))
            return rs_err_set(err, RS_ERR_ARG, "%s: the config says %s, but the version folder holds no %s (%s is "
                              "served from VERSION/%s)", where, (*o)->platform, (*o)->file, (*o)->what, (*o)->file);
    return RS_OK;
}

rs_status rs_serve_backend_complete(const rs_serve_backend *b, rs_serve_config *c, const char *where, rs_err *err)
{
    rs_status st = check_names(b, c, where, err);
    if (!st) st = b->ops->complete(b->impl, c, where, err);
    if (st) return st;
    if (!c->instance_kind[0]) snprintf(c->instance_kind, sizeof c->instance_kind, "KIND_CPU");
    if (c->instance_count <= 0) c->instance_count = 1;
    if (c->decoupled && !b->ops->generate)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: model '%s' is decoupled (model_transaction_policy), but "
                          "only a GPT (model.safetensors) answers with a stream of responses", where, c->name);
    return RS_OK;
}

static bool io_same(const rs_serve_io *a, const rs_serve_io *b)
{
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d] && a->dims[d] != -1) return false;
    return true;
}

static void names_of(const rs_serve_io *io, int n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s'%s'", i ? ", " : "", io[i].name);
}

/* io's dims per sample (without the batch a config writing it in the dims has first). */
static rs_serve_io per_sample(const rs_serve_io *o, bool full)
{
    rs_serve_io per = *o;
    if (o->has_reshape) {
        per.rank = o->reshape_rank;
        memcpy(per.dims, o->reshape, sizeof per.dims);
    }
    if (full && per.rank > 0) {
        per.rank--;
        memmove(per.dims, per.dims + 1, sizeof(int64_t) * (size_t)per.rank);
    }
    return per;
}

/* The config's dims against the model's (the same, the config's -1 filled in from the model). A
 * request's buffers are sized from the config's dims and the model reads and writes its own, so they
 * must be the same. */
static rs_status fit_dims(rs_serve_io *o, const rs_serve_io *md, bool full, const char *kind, const char *where,
                          rs_err *err)
{
    rs_serve_io per = per_sample(o, full);
    if (!io_same(&per, md))
        return rs_err_set(err, RS_ERR_SHAPE, "%s: %s '%s' dims differ from the model file's", where, kind, o->name);
    for (int d = 0; d < md->rank; d++) {
        if (md->dims[d] < 1)
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s '%s' has a dimension of any size; ringside serves "
                              "fixed per-sample shapes", where, kind, o->name);
        o->dims[d + full] = md->dims[d];
    }
    return RS_OK;
}

static int64_t count_of(const int64_t *d, int from, int rank)
{
    int64_t n = 1;
    for (int k = from; k < rank; k++) n *= d[k];
    return n;
}

/* reshape: the model's tensor has the reshape's shape, the request the dims' (Triton's reshape), the
 * same elements in the same order, so the bytes pass as they are. */
static rs_status reshaped(rs_serve_io *o, const rs_serve_io *md, bool full, const char *kind, const char *where,
                          rs_err *err)
{
    rs_serve_io per = per_sample(o, full);
    for (int d = full; d < o->rank; d++)
        if (o->dims[d] < 1)
            return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s '%s' has reshape and a dim of any size; ringside "
                              "reshapes fixed dims", where, kind, o->name);
    if (!io_same(&per, md))
        return rs_err_set(err, RS_ERR_SHAPE, "%s: %s '%s': reshape's shape differs from the model file's", where,
                          kind, o->name);
    if (count_of(o->dims, full, o->rank) != count_of(md->dims, 0, md->rank))
        return rs_err_set(err, RS_ERR_SHAPE, "%s: %s '%s': dims hold %lld elements a sample, reshape %lld", where,
                          kind, o->name, (long long)count_of(o->dims, full, o->rank),
                          (long long)count_of(md->dims, 0, md->rank));
    return RS_OK;
}

/* One side (inputs or outputs) of the config against the model's: the same names, put in the model's
 * order, the same data types, dims that fit (the config's -1 filled in from the model). */
static rs_status complete_side(rs_serve_io *cf, int *ncf, const rs_serve_io *md, int nmd, bool full, const char *kind,
                               const char *where, rs_err *err)
{
    char names[512];
    names_of(md, nmd, names, sizeof names);
    if (*ncf == 0) {
        for (int i = 0; i < nmd; i++) cf[i] = md[i];
        *ncf = nmd;
    }
    if (*ncf != nmd)
        return rs_err_set(err, RS_ERR_ARG, "%s: the config states %d %ss; the model file has %d (%s)", where, *ncf, kind,
                          nmd, names);
    rs_serve_io ordered[RS_SERVE_MAX_IO];
    for (int j = 0; j < nmd; j++) {
        int i = 0;
        while (i < *ncf && strcmp(cf[i].name, md[j].name)) i++;
        if (i == *ncf)
            return rs_err_set(err, RS_ERR_ARG, "%s: the model file's %s '%s' is not in the config (the model's %ss: %s)",
                              where, kind, md[j].name, kind, names);
        ordered[j] = cf[i];
        rs_serve_io *o = &ordered[j];
        if (o->dtype != md[j].dtype)
            return rs_err_set(err, RS_ERR_ARG, "%s: %s '%s' is %s in the config, %s in the model file", where, kind,
                              o->name, rs_serve_dtype_config_name(o->dtype), rs_serve_dtype_config_name(md[j].dtype));
        rs_status st = o->has_reshape ? reshaped(o, &md[j], full, kind, where, err)
                                      : fit_dims(o, &md[j], full, kind, where, err);
        if (st) return st;
    }
    memcpy(cf, ordered, sizeof(rs_serve_io) * (size_t)nmd);
    return RS_OK;
}

/* Without batching, a config whose every tensor has one dim more than the model's per-sample one
 * writes the batch in its dims (Triton's form for max_batch_size 0). */
static bool writes_batch(const rs_serve_config *c, const rs_serve_ios *io)
{
    if (c->max_batch_size != 0 || c->ninputs != io->nin || c->noutputs != io->nout || !c->ninputs) return false;
    for (int i = 0; i < c->ninputs + c->noutputs; i++) {
        const rs_serve_io *cf = i < c->ninputs ? &c->inputs[i] : &c->outputs[i - c->ninputs];
        const rs_serve_io *md = i < c->ninputs ? io->in : io->out;
        int n = i < c->ninputs ? io->nin : io->nout;
        for (int j = 0; j < n; j++)
            if (!strcmp(cf->name, md[j].name) && (cf->has_reshape ? cf->reshape_rank : cf->rank) != md[j].rank + 1)
                return false;
    }
    return true;
}

rs_status rs_srv_complete_tensors(rs_serve_config *c, const rs_serve_ios *io, const char *where, rs_err *err)
{
    c->full_dims = writes_batch(c, io);
    rs_status st = complete_side(c->inputs, &c->ninputs, io->in, io->nin, c->full_dims, "input", where, err);
    if (!st) st = complete_side(c->outputs, &c->noutputs, io->out, io->nout, c->full_dims, "output", where, err);
    return st;
}

rs_status rs_srv_output_f32(const float *y, size_t n, rs_serve_tensor *out, rs_err *err)
{
    out->bytes = n * sizeof *y;
    out->data = malloc(out->bytes ? out->bytes : 1); /* the caller's */
    if (!out->data) return rs_err_set(err, RS_ERR_NOMEM, "out of memory for %zu output values", n);
    memcpy(out->data, y, out->bytes);
    return RS_OK;
}

rs_status rs_serve_backend_use_ranks(rs_serve_backend *b, int ranks, const char *mode, int max_batch, int worker_index,
                                     rs_err *err)
{
    rs_serve_ranks_cfg c = {.model = b->path, .ranks = ranks, .mode = mode, .max_batch = max_batch,
                            .worker_index = worker_index};
    if (!b->ops->ranks_cfg)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: %s runs in one process (ranks=1)", b->path, b->ops->what);
    rs_status st = b->ops->ranks_cfg(b->impl, b->path, max_batch, &c, err);
    if (st) return st;
    if (c.max_batch < 1) c.max_batch = 1;
    return rs_srv_ranks_wrap(b, &c, err);
}

void rs_serve_backend_ranks_text(rs_serve_backend *b, char *buf, size_t cap)
{
    if (b->ops->describe) b->ops->describe(b->impl, buf, cap);
    else if (cap) buf[0] = 0;
}

rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err)
{
    *out = NULL;
    rs_serve_inst *in = calloc(1, sizeof *in); /* the caller's */
    if (!in) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    in->b = b;
    rs_status st = b->ops->new_instance(b->impl, max_batch > 0 ? max_batch : 1, &in->impl, err);
    if (st) {
        rs_serve_inst_free(in);
        return st;
    }
    *out = in;
    return RS_OK;
}

void rs_serve_inst_free(rs_serve_inst *in)
{
    if (!in) return;
    if (in->impl && in->b->ops->free_instance) in->b->ops->free_instance(in->impl);
    free(in);
}

rs_status rs_serve_inst_run_tensors(rs_serve_inst *in, const rs_serve_tensor *x, int B, rs_serve_tensor *y,
                                    rs_err *err)
{
    const rs_serve_backend *b = in->b;
    if (!b->ops->run) return rs_err_set(err, RS_ERR_UNSUPPORTED, "this model generates text; it runs no tensors");
    rs_serve_ios io;
    b->ops->io(b->impl, &io);
    for (int i = 0; i < io.nin && !b->ops->absent_inputs; i++)
        if (!x[i].data)
            return rs_err_set(err, RS_ERR_ARG, "input '%s' was left out (optional in the config), but %s runs every "
                              "input: send it", io.in[i].name, b->ops->what);
    return b->ops->run(b->impl, in->impl, x, B, y, err);
}

static size_t numel(const rs_serve_io *io)
{
    size_t n = 1;
    for (int d = 0; d < io->rank; d++) n *= (size_t)io->dims[d];
    return n;
}

rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err)
{
    rs_serve_ios io;
    rs_serve_backend_ios(in->b, &io);
    if (io.nin != 1 || io.nout != 1 || io.in[0].dtype != RS_SERVE_FP32 || io.out[0].dtype != RS_SERVE_FP32)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "the model takes %d inputs and gives %d outputs, not one FP32 tensor "
                          "each", io.nin, io.nout);
    rs_serve_tensor tx = {(void *)x, (size_t)B * numel(&io.in[0]) * sizeof *x}, ty = {0};
    rs_status st = rs_serve_inst_run_tensors(in, &tx, B, &ty, err);
    if (!st) memcpy(y, ty.data, (size_t)B * numel(&io.out[0]) * sizeof *y);
    free(ty.data);
    return st;
}

void rs_serve_gen_init(rs_serve_gen *g)
{
    rs_gen_cfg d = rs_gen_defaults();
    memset(g, 0, sizeof *g);
    g->max_tokens = d.n;
    g->temperature = d.temp;
    g->top_k = d.top_k;
    g->seed = d.seed;
}

rs_status rs_serve_inst_generate(rs_serve_inst *in, rs_serve_gen *g, rs_err *err)
{
    const rs_serve_backend *b = in->b;
    if (!b->ops->generate) return rs_err_set(err, RS_ERR_UNSUPPORTED, "this model does not generate text");
    if (g->max_tokens < 0 || g->max_tokens > 100000 || !(g->temperature >= 0.0f) || g->top_k < 0)
        return rs_err_set(err, RS_ERR_ARG, "max_tokens must be 0..100000, temperature >= 0 and top_k >= 0");
    return b->ops->generate(b->impl, in->impl, g, err);
}
