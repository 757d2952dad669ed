/* The ensemble backend (ensemble.h). A run keeps a table of the ensemble's tensors by name: the
 * request's inputs first, then each step's outputs as its output_map names them; a step's inputs are
 * taken from it by its input_map and checked against that model's config (type and bytes) before its
 * scheduler sees them, since a scheduler trusts what it is given. No state per instance: the steps'
 * models run on their own instances. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "ensemble.h"
#include "infer_check.h"

#define MAX_TENSORS (RS_SERVE_MAX_IO * (RS_SERVE_MAX_STEPS + 1))

typedef struct ensemble {
    rs_serve_server *s;   /* borrowed */
    rs_serve_config c;    /* the ensemble's config */
    rs_serve_ios io;
} ensemble;

typedef struct named {
    const char *name;     /* borrowed from the config */
    rs_serve_dtype dtype;
    rs_serve_tensor t;
    bool owned;
} named;

static void ens_free(void *impl) { free(impl); }

static void ens_io(const void *impl, rs_serve_ios *io) { *io = ((const ensemble *)impl)->io; }

static rs_status ens_complete(const void *impl, rs_serve_config *c, const char *where, rs_err *err)
{
    (void)impl, (void)where, (void)err;
    c->full_dims = false;
    return RS_OK;
}

static rs_status ens_new_instance(void *impl, int max_batch, void **inst, rs_err *err)
{
    (void)impl, (void)max_batch, (void)inst, (void)err;
    return RS_OK;
}

static named *find(named *tab, int n, const char *name)
{
    for (int i = n - 1; i >= 0; i--)
        if (!strcmp(tab[i].name, name)) return &tab[i];
    return NULL;
}

/* Step k of the ensemble on the tensors so far (tab, *n): its outputs join the table. */
static rs_status run_step(const ensemble *e, int k, named *tab, int *n, int B, rs_err *err)
{
    const rs_serve_step *st = &e->c.steps[k];
    rs_serve_model *m = rs_serve_acquire(e->s, st->model);
    if (!m) return rs_err_set(err, RS_ERR_UNSUPPORTED, "ensemble '%s': step %d's model '%s' is not loaded", e->c.name,
                              k + 1, st->model);
    if (m->cfg.ensemble) { /* a cycle of ensembles would wait on itself: one level only */
        rs_serve_release(e->s, m);
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "ensemble '%s': step %d's model '%s' is an ensemble itself; "
                          "ringside runs one level of ensemble (list its steps here instead)", e->c.name, k + 1,
                          st->model);
    }
    char ver[24] = "";
    if (st->version >= 0) snprintf(ver, sizeof ver, "%lld", (long long)st->version);
    rs_serve_version *v = rs_serve_model_version(m, ver);
    const rs_serve_config *mc = &m->cfg;
    rs_serve_tensor x[RS_SERVE_MAX_IO] = {{0}}, y[RS_SERVE_MAX_IO] = {{0}};
    rs_status rc = v ? RS_OK : rs_err_set(err, RS_ERR_UNSUPPORTED, "ensemble '%s': model '%s' has no version %s",
                                          e->c.name, st->model, ver);
    for (int j = 0; !rc && j < mc->ninputs; j++) {
        const char *from = NULL;
        for (int i = 0; i < st->nin; i++)
            if (!strcmp(st->in[i].key, mc->inputs[j].name)) from = st->in[i].value;
        named *t = from ? find(tab, *n, from) : NULL;
        char msg[512] = "";
        if (!t)
            rc = rs_err_set(err, RS_ERR_ARG, "ensemble '%s': step %d's input '%s' of model '%s' %s%s%s", e->c.name,
                            k + 1, mc->inputs[j].name, st->model, from ? "maps to '" : "is in no input_map",
                            from ? from : "", from ? "', which no input or earlier step gives" : "");
        else if (t->dtype != mc->inputs[j].dtype)
            rc = rs_err_set(err, RS_ERR_ARG, "ensemble '%s': tensor '%s' is %s, but model '%s' expects '%s' for its "
                            "input '%s'", e->c.name, t->name, rs_serve_dtype_v2_name(t->dtype), st->model,
                            rs_serve_dtype_v2_name(mc->inputs[j].dtype), mc->inputs[j].name);
        else if (!rs_serve_check_data(mc->name, &mc->inputs[j], t->t.data, t->t.bytes,
                                      (size_t)B * rs_serve_io_numel(mc, &mc->inputs[j]), msg, sizeof msg))
            rc = rs_err_set(err, RS_ERR_ARG, "ensemble '%s', step %d: %s", e->c.name, k + 1, msg);
        else x[j] = t->t;
    }
    if (!rc) rc = rs_serve_sched_infer_tensors(v->sched, x, B, y, err);
    for (int j = 0; j < mc->noutputs; j++) {
        const char *to = NULL;
        for (int i = 0; !rc && i < st->nout; i++)
            if (!strcmp(st->out[i].key, mc->outputs[j].name)) to = st->out[i].value;
        if (!to || *n == MAX_TENSORS) {
            free(y[j].data);
            continue;
        }
        tab[(*n)++] = (named){.name = to, .dtype = mc->outputs[j].dtype, .t = y[j], .owned = true};
    }
    rs_serve_release(e->s, m);
    return rc;
}

static rs_status ens_run(void *impl, void *inst, const rs_serve_tensor *x, int B, rs_serve_tensor *y, rs_err *err)
{
    (void)inst;
    const ensemble *e = impl;
    named tab[MAX_TENSORS];
    int n = 0;
    for (int i = 0; i < e->io.nin; i++)
        tab[n++] = (named){.name = e->io.in[i].name, .dtype = e->io.in[i].dtype, .t = x[i]};
    rs_status rc = RS_OK;
    for (int k = 0; !rc && k < e->c.nsteps; k++) rc = run_step(e, k, tab, &n, B, err);
    char msg[512];
    for (int o = 0; !rc && o < e->io.nout; o++) {
        const rs_serve_io *io = &e->io.out[o];
        named *t = find(tab, n, io->name);
        if (!t)
            rc = rs_err_set(err, RS_ERR_ARG, "ensemble '%s': output '%s' is given by no step", e->c.name, io->name);
        else if (t->dtype != io->dtype)
            rc = rs_err_set(err, RS_ERR_ARG, "ensemble '%s': output '%s' is %s from its step, %s in the config",
                            e->c.name, io->name, rs_serve_dtype_v2_name(t->dtype), rs_serve_dtype_v2_name(io->dtype));
        else if (!rs_serve_check_data(e->c.name, io, t->t.data, t->t.bytes, (size_t)B * rs_serve_io_numel(&e->c, io),
                                      msg, sizeof msg))
            rc = rs_err_set(err, RS_ERR_ARG, "ensemble '%s': output '%s' from its step does not fit the config's "
                            "dims: %s", e->c.name, io->name, msg);
        else if (!(y[o].data = malloc(t->t.bytes + 1))) /* the caller's */
            rc = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
        else {
            memcpy(y[o].data, t->t.data, t->t.bytes);
            y[o].bytes = t->t.bytes;
        }
    }
    for (int i = 0; i < n; i++)
        if (tab[i].owned) free(tab[i].t.data);
    if (rc)
        for (int o = 0; o < e->io.nout; o++) {
            free(y[o].data);
            y[o].data = NULL;
        }
    return rc;
}

static const rs_srv_backend_ops ensemble_ops = {
    .name = "ensemble",
    .what = "an ensemble",
    .free = ens_free,
    .io = ens_io,
    .complete = ens_complete,
    .new_instance = ens_new_instance,
    .run = ens_run,
};

rs_status rs_serve_ensemble_new(rs_serve_server *s, const rs_serve_config *c, rs_serve_backend **out, rs_err *err)
{
    *out = NULL;
    ensemble *e = calloc(1, sizeof *e);  /* the backend's: ens_free */
    rs_serve_backend *b = calloc(1, sizeof *b); /* the caller's */
    char *path = strdup(c->name);
    if (!e || !b || !path) {
        free(e), free(b), free(path);
        return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    }
    e->s = s;
    e->c = *c;
    e->io.nin = c->ninputs;
    e->io.nout = c->noutputs;
    memcpy(e->io.in, c->inputs, sizeof e->io.in);
    memcpy(e->io.out, c->outputs, sizeof e->io.out);
    *b = (rs_serve_backend){.ops = &ensemble_ops, .impl = e, .path = path};
    *out = b;
    return RS_OK;
}
