/* The sequence batcher's request side (sequence.h). */
#include "sequence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool fill(const rs_serve_io *io, const rs_serve_seq *q, rs_serve_tensor *x)
{
    if (io->control == RS_SERVE_CTL_CORRID && io->dtype == RS_SERVE_STRING) {
        size_t len = strlen(q->sid);
        uint8_t *p = x->data = malloc(4 + len + 1);
        if (!p) return false;
        p[0] = (uint8_t)len, p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)(len >> 16), p[3] = (uint8_t)(len >> 24);
        memcpy(p + 4, q->sid, len);
        x->bytes = 4 + len;
        return true;
    }
    x->bytes = rs_serve_dtype_size(io->dtype);
    if (!(x->data = malloc(x->bytes + 1))) return false;
    if (io->control == RS_SERVE_CTL_CORRID) {
        rs_serve_dtype_convert(RS_SERVE_UINT64, &q->id, io->dtype, x->data, 1);
        return true;
    }
    bool on = io->control == RS_SERVE_CTL_START ? q->start : io->control == RS_SERVE_CTL_END ? q->end : true;
    double v = io->false_true[on];
    rs_serve_dtype_convert(RS_SERVE_FP64, &v, io->dtype, x->data, 1);
    return true;
}

bool rs_serve_seq_apply(const rs_serve_config *c, rs_serve_sched *s, const rs_serve_seq *q, int64_t B,
                        rs_serve_tensor *x, rs_serve_pin *pin, char *msg, size_t n)
{
    if (!q->given) {
        snprintf(msg, n, "inference request to model '%s' must specify a non-zero or non-empty correlation ID",
                 c->name);
        return false;
    }
    if (B > 1) {
        snprintf(msg, n, "inference request to model '%s' must specify batch-size 1 due to requirements of sequence "
                 "batcher", c->name);
        return false;
    }
    for (int i = 0; i < c->ninputs; i++) {
        const rs_serve_io *io = &c->inputs[i];
        if (io->control == RS_SERVE_CTL_CORRID && q->is_str != (io->dtype == RS_SERVE_STRING)) {
            snprintf(msg, n, "sequence batching control '%s' data-type is '%s', but model '%s' expects '%s'", io->name,
                     q->is_str ? "BYTES" : "UINT64", c->name, rs_serve_dtype_v2_name(io->dtype));
            return false;
        }
    }
    char key[RS_SERVE_NAME_MAX + 8];
    if (q->is_str) snprintf(key, sizeof key, "s:%s", q->sid);
    else snprintf(key, sizeof key, "u:%llu", (unsigned long long)q->id);
    rs_err err = {0};
    if (rs_serve_sched_sequence(s, key, q->start, q->end, c->name, pin, &err)) {
        snprintf(msg, n, "%s", err.msg);
        return false;
    }
    for (int i = 0; i < c->ninputs; i++)
        if (c->inputs[i].control && !fill(&c->inputs[i], q, &x[i])) {
            snprintf(msg, n, "out of memory");
            return false;
        }
    return true;
}
