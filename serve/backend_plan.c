/* A compiled plan as a served model (see backend_plan.h). */
#include "backend_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rs_serve_plan {
    char *path;       /* owned */
    rs_plan *first;   /* owned until the first instance takes it (NULL after) */
    uint8_t *bytes;   /* owned: the serialized plan, what further instances load */
    size_t nbytes;
    rs_serve_io in, out; /* what the plan takes and gives, read once at open */
    size_t out_numel;
    int batch;
};

static void describe(rs_serve_plan *sp)
{
    rs_serve_io *in = &sp->in, *out = &sp->out;
    snprintf(in->name, sizeof in->name, "input");
    snprintf(out->name, sizeof out->name, "logits");
    in->dtype = out->dtype = RS_SERVE_FP32;
    const rs_shape *s = rs_plan_input_shape(sp->first);
    for (int d = 0; d < s->ndim && in->rank < RS_SERVE_MAX_DIMS; d++) in->dims[in->rank++] = s->d[d];
    int rows = rs_plan_rows(sp->first), classes = rs_plan_classes(sp->first);
    if (rows > 1) out->dims[out->rank++] = rows;
    out->dims[out->rank++] = classes;
    sp->out_numel = (size_t)rows * (size_t)classes;
    sp->batch = rs_plan_batch(sp->first);
}

rs_status rs_serve_plan_open(const char *path, rs_serve_plan **out, rs_err *err)
{
    *out = NULL;
    rs_serve_plan *sp = calloc(1, sizeof *sp); /* the caller's */
    if (!sp || !(sp->path = strdup(path))) {
        free(sp);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    rs_status st = rs_plan_load(path, &sp->first, err);
    if (!st && rs_plan_tokens(sp->first))
        st = rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: a token plan (a GPT) takes int32 token ids; serve/ serves FP32 "
                        "tensors: serve the GPT itself (its model.safetensors) to generate text", path);
    if (!st && rs_plan_rows(sp->first) < 1)
        st = rs_err_set(err, RS_ERR_FORMAT, "%s: the plan has %d output rows", path, rs_plan_rows(sp->first));
    if (!st) st = rs_plan_serialize(sp->first, &sp->bytes, &sp->nbytes, err);
    if (st) {
        rs_serve_plan_close(sp);
        return st;
    }
    describe(sp);
    *out = sp;
    return RS_OK;
}

void rs_serve_plan_close(rs_serve_plan *sp)
{
    if (!sp) return;
    rs_plan_free(sp->first);
    free(sp->bytes);
    free(sp->path);
    free(sp);
}

void rs_serve_plan_io(const rs_serve_plan *sp, rs_serve_io *in, rs_serve_io *out, size_t *out_numel)
{
    *in = sp->in;
    *out = sp->out;
    *out_numel = sp->out_numel;
}

int rs_serve_plan_batch(const rs_serve_plan *sp) { return sp->batch; }

rs_status rs_serve_plan_instance(rs_serve_plan *sp, rs_plan **out, rs_err *err)
{
    *out = NULL;
    if (sp->first) {
        *out = sp->first;
        sp->first = NULL;
        return RS_OK;
    }
    return rs_plan_load_buffer(sp->bytes, sp->nbytes, sp->path, out, err);
}
