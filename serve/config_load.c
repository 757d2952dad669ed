/* A config.pbtxt from a file (the parser is config.c), and what the server does with the fields ringside
 * reads but does not act on: refused by name, or reported as not run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

rs_status rs_serve_config_load(const char *path, rs_serve_config *c, rs_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap); /* owned here */
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            if (cap >= ((size_t)1 << 24)) {
                fclose(f);
                free(buf);
                return rs_err_set(err, RS_ERR_FORMAT, "%s: larger than 16 MB; is it a config.pbtxt?", path);
            }
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", path);
    rs_status st = rs_serve_config_parse(buf, n, path, c, err);
    free(buf);
    /* label files sit beside config.pbtxt */
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) : 1;
    for (int k = 0; !st && k < c->noutputs; k++) {
        rs_serve_io *o = &c->outputs[k];
        if (!o->labels[0]) continue;
        char full[sizeof o->labels];
        if (snprintf(full, sizeof full, "%.*s/%s", dl, slash ? path : ".", o->labels) >= (int)sizeof full)
            return rs_err_set(err, RS_ERR_ARG, "%s: label_filename '%s': the path is too long", path, o->labels);
        memcpy(o->labels, full, sizeof full);
    }
    return st;
}

void rs_serve_config_model_path(const rs_serve_config *c, const char *repo, const char *name, int64_t version,
                                char *buf, size_t n)
{
    if (c->default_model_filename[0]) /* a plain file name: read_file_name checked it */
        snprintf(buf, n, "%s/%s/%lld/%s", repo, name, (long long)version, c->default_model_filename);
}

const char *rs_serve_config_ignored(const rs_serve_config *c)
{
    return c->warmup ? "model_warmup: not run (ringside loads a model without warm-up requests)" : "";
}

rs_status rs_serve_config_check_supported(const rs_serve_config *c, const char *where, rs_err *err)
{
    if (c->response_cache)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: response_cache { enable: true }: ringside has no response "
                          "cache; remove it or set enable: false", where);
    /* Triton's ModelConfig holds these in one oneof (scheduling_choice): its parser refuses a second */
    if (c->dynamic_batching + c->sequence_batching + c->ensemble > 1)
        return rs_err_set(err, RS_ERR_ARG, "%s: dynamic_batching, sequence_batching and ensemble_scheduling are one "
                          "choice (Triton's scheduling_choice): keep one", where);
    bool says = !strcmp(c->platform, "ensemble");
    if (says != c->ensemble || (says && !c->nsteps))
        return rs_err_set(err, RS_ERR_ARG, "%s: an ensemble is platform: \"ensemble\" with ensemble_scheduling { step "
                          "[ ... ] }; this config has %s", where, says ? "no steps" : "steps but another platform");
    for (int i = 0; i < c->nsteps; i++)
        if (!strcmp(c->steps[i].model, c->name) || !c->steps[i].model[0])
            return rs_err_set(err, RS_ERR_ARG, "%s: ensemble step %d runs '%s': a step names another model", where,
                              i + 1, c->steps[i].model);
    if (c->ensemble && (!c->ninputs || !c->noutputs))
        return rs_err_set(err, RS_ERR_ARG, "%s: an ensemble states its input and output (there is no model file to "
                          "take them from)", where);
    if (c->sequence_oldest || c->sequence_state)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: sequence_batching %s: ringside's sequence batcher is the direct "
                          "strategy without implicit state; use direct { }", where,
                          c->sequence_oldest ? "oldest" : "state");
    for (int i = 0; i < c->ninputs; i++) {
        const rs_serve_io *io = &c->inputs[i];
        if (io->control && !c->sequence_batching) continue;
        if (io->control == RS_SERVE_CTL_CORRID && io->dtype != RS_SERVE_UINT64 && io->dtype != RS_SERVE_INT64 &&
            io->dtype != RS_SERVE_UINT32 && io->dtype != RS_SERVE_INT32 && io->dtype != RS_SERVE_STRING)
            return rs_err_set(err, RS_ERR_ARG, "%s: control input '%s' (CONTROL_SEQUENCE_CORRID) needs data_type "
                              "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING", where, io->name);
        if (io->control && io->control != RS_SERVE_CTL_CORRID && io->dtype == RS_SERVE_INVALID)
            return rs_err_set(err, RS_ERR_ARG, "%s: control input '%s' states no int32_false_true, fp32_false_true or "
                              "bool_false_true", where, io->name);
    }
    if (!strcmp(c->instance_kind, "KIND_GPU"))
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: instance_group kind: KIND_GPU: served models run on the CPU "
                          "here; use KIND_CPU (or KIND_AUTO)", where);
    for (int i = 0; i < c->ninputs; i++)
        if (c->inputs[i].optional && c->inputs[i].control)
            return rs_err_set(err, RS_ERR_ARG, "%s: control input '%s' cannot be optional: the server always fills it",
                              where, c->inputs[i].name);
    return RS_OK;
}
