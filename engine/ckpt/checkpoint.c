/* Model and training checkpoints over safetensors (see checkpoint.h). */
#include "checkpoint.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define FORMAT "ringside-1"

char *rs_ckpt_optim_path(const char *path)
{
    size_t n = strlen(path);
    const char *ext = ".safetensors";
    size_t el = strlen(ext);
    size_t stem = (n > el && !strcmp(path + n - el, ext)) ? n - el : n;
    char *out = malloc(stem + strlen(".optim.safetensors") + 1);
    if (!out) return NULL;
    memcpy(out, path, stem);
    strcpy(out + stem, ".optim.safetensors");
    return out;
}

/* Tensors of the model, views into its parameter buffer (or a state buffer laid out the same way). */
static rs_st_tensor *model_tensors(rs_model *m, const float *base, const char *suffix, char (*names)[128])
{
    int n = rs_model_tensor_count(m);
    rs_st_tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        snprintf(names[i], 128, "%s%s", pi->name, suffix);
        t[i] = (rs_st_tensor){.name = names[i], .dtype = RS_F32, .shape = pi->shape, .data = base + pi->offset};
    }
    return t;
}

/* Host floats of an optimizer state buffer of n values: the buffer on the CPU, else a copy (see
 * rs_kctx_host_view), given back with state_back. */
static float *state_host(rs_optim *o, float *dev, size_t n, rs_err *err)
{
    return rs_kctx_host_view(rs_optim_ctx(o), dev, n * sizeof(float), err);
}

static rs_status state_back(rs_optim *o, float *dev, float *host, size_t n, rs_err *err)
{
    return rs_kctx_host_done(rs_optim_ctx(o), dev, host, n * sizeof(float), true, err);
}

static rs_status save_weights(const char *path, rs_model *m, const char *const *extra, int n_extra, rs_err *err)
{
    int n = rs_model_tensor_count(m);
    float *params = rs_model_params_map(m, err); /* host floats: a copy for a model on a device */
    if (!params) return err ? err->code : RS_ERR_NOMEM;
    char (*names)[128] = calloc((size_t)(n ? n : 1), sizeof *names);
    rs_st_tensor *t = names ? model_tensors(m, params, "", names) : NULL;
    char *spec = rs_model_spec(m);
    char count[32];
    size_t real = 0; /* parameters, without the alignment padding between tensors */
    for (int i = 0; i < n; i++) real += rs_model_tensor(m, i)->numel;
    snprintf(count, sizeof count, "%zu", real);
    const char *meta[32] = {"format", FORMAT, "model", spec ? spec : "", "name", rs_model_name(m), "params", count};
    int nm = 4;
    for (int i = 0; i < n_extra && nm < 15; i++, nm++) {
        meta[2 * nm] = extra[2 * i];
        meta[2 * nm + 1] = extra[2 * i + 1];
    }
    rs_status st;
    if (!names || !t || !spec) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory writing %s", path);
    else st = rs_st_write(path, t, n, meta, nm, err);
    rs_model_params_unmap(m, params, false, NULL);
    free(spec);
    free(t);
    free(names);
    return st;
}

rs_status rs_ckpt_save_model(const char *path, rs_model *m, rs_err *err) { return save_weights(path, m, NULL, 0, err); }

/* Checks every model tensor is in f with the right dtype and shape, and nothing else is. */
static rs_status check_tensors(const rs_st_file *f, rs_model *m, const char *suffix, rs_err *err)
{
    char want[64], have[64], name[128];
    int n = rs_model_tensor_count(m), matched = 0;
    for (int i = 0; i < n; i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        snprintf(name, sizeof name, "%s%s", pi->name, suffix);
        const rs_st_info *in = rs_st_find(f, name);
        if (!in)
            return rs_err_set(err, RS_ERR_SHAPE,
                              "%s has no tensor '%s' that model %s needs (shape %s); was it saved from "
                              "another model?",
                              rs_st_name(f), name, rs_model_name(m), rs_shape_str(&pi->shape, want, sizeof want));
        if (in->dtype != RS_F32)
            return rs_err_set(err, RS_ERR_FORMAT, "%s: tensor '%s' is %s; ringside loads F32", rs_st_name(f), name,
                              rs_dtype_st_name(in->dtype));
        if (!rs_shape_eq(&in->shape, &pi->shape))
            return rs_err_set(err, RS_ERR_SHAPE, "%s: tensor '%s' has shape %s but model %s expects %s",
                              rs_st_name(f), name, rs_shape_str(&in->shape, have, sizeof have), rs_model_name(m),
                              rs_shape_str(&pi->shape, want, sizeof want));
        matched++;
    }
    if (matched != rs_st_count(f)) {
        for (int i = 0; i < rs_st_count(f); i++) {
            const rs_st_info *in = rs_st_at(f, i);
            bool known = false;
            for (int j = 0; j < n && !known; j++) {
                snprintf(name, sizeof name, "%s%s", rs_model_tensor(m, j)->name, suffix);
                known = !strcmp(name, in->name);
            }
            if (!known)
                return rs_err_set(err, RS_ERR_SHAPE, "%s has tensor '%s' %s that model %s does not have",
                                  rs_st_name(f), in->name, rs_shape_str(&in->shape, have, sizeof have),
                                  rs_model_name(m));
        }
    }
    return RS_OK;
}

static void copy_tensors(const rs_st_file *f, rs_model *m, float *base, const char *suffix)
{
    char name[128];
    for (int i = 0; i < rs_model_tensor_count(m); i++) {
        const rs_param_info *pi = rs_model_tensor(m, i);
        snprintf(name, sizeof name, "%s%s", pi->name, suffix);
        const rs_st_info *in = rs_st_find(f, name);
        memcpy(base + pi->offset, rs_st_data(f, in), pi->numel * sizeof(float));
    }
}

rs_status rs_ckpt_load_model(const char *path, rs_model *m, rs_err *err)
{
    rs_st_file *f = NULL;
    rs_status st = rs_st_open(path, &f, err);
    if (st) return st;
    st = check_tensors(f, m, "", err);
    float *params = st ? NULL : rs_model_params_map(m, err);
    if (!st && !params) st = err ? err->code : RS_ERR_NOMEM;
    if (!st) {
        copy_tensors(f, m, params, "");
        st = rs_model_params_unmap(m, params, true, err);
    }
    rs_st_close(f);
    return st;
}

char *rs_ckpt_read_spec(const char *path, rs_err *err)
{
    rs_st_file *f = NULL;
    if (rs_st_open(path, &f, err)) return NULL;
    const char *s = rs_st_meta(f, "model");
    char *out = s && *s ? strdup(s) : NULL;
    if (!out) rs_err_set(err, RS_ERR_FORMAT, "%s does not say which model it holds (no 'model' metadata)", path);
    rs_st_close(f);
    return out;
}

rs_status rs_ckpt_save_train(const char *path, rs_model *m, rs_optim *o, const rs_ckpt_pos *pos, rs_err *err)
{
    char step[32], epoch[32], batch[32], seed[32], mseed[32], mstep[32], bsize[32], ostep[32];
    snprintf(step, sizeof step, "%" PRId64, pos->step);
    snprintf(epoch, sizeof epoch, "%d", pos->epoch);
    snprintf(batch, sizeof batch, "%" PRId64, pos->batch_in_epoch);
    snprintf(seed, sizeof seed, "%" PRIu64, pos->data_seed);
    snprintf(mstep, sizeof mstep, "%" PRIu64, pos->model_step);
    snprintf(mseed, sizeof mseed, "%" PRIu64, pos->model_seed);
    snprintf(bsize, sizeof bsize, "%" PRId64, pos->batch);
    snprintf(ostep, sizeof ostep, "%" PRId64, rs_optim_step_count(o));
    const char *posmeta[] = {"train.step", step, "train.epoch", epoch, "train.batch_in_epoch", batch,
                             "train.seed", seed, "train.model_step", mstep, "train.model_seed", mseed,
                             "train.batch", bsize};
    if (rs_optim_numel(o) != rs_model_numel(m))
        return rs_err_set(err, RS_ERR_ARG, "optimizer covers %zu values, model %s has %zu", rs_optim_numel(o),
                          rs_model_name(m), rs_model_numel(m));
    /* Optimizer file first: a weights file on disk then always has the state that goes with it. */
    char *opath = rs_ckpt_optim_path(path);
    int n = rs_model_tensor_count(m), ns = rs_optim_state_count(o);
    size_t total = (size_t)n * (size_t)(ns ? ns : 1);
    char (*names)[128] = calloc(total, sizeof *names);
    rs_st_tensor *all = calloc(total, sizeof *all);
    float *host[8] = {0}; /* host floats of each state buffer (copies on a device, freed below) */
    rs_status st = RS_OK;
    if (!opath || !names || !all) st = rs_err_set(err, RS_ERR_NOMEM, "out of memory writing %s", path);
    if (ns > 8) st = rs_err_set(err, RS_ERR_INTERNAL, "optimizer keeps %d state buffers, more than 8", ns);
    for (int s = 0; s < ns && !st; s++) {
        char suffix[40];
        snprintf(suffix, sizeof suffix, ".%s", rs_optim_state_name(o, s));
        host[s] = state_host(o, rs_optim_state(o, s), rs_optim_numel(o), err);
        if (!host[s]) {
            st = err ? err->code : RS_ERR_NOMEM;
            break;
        }
        rs_st_tensor *t = model_tensors(m, host[s], suffix, names + (size_t)s * n);
        if (!t) {
            st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(all + (size_t)s * n, t, (size_t)n * sizeof *t);
        free(t);
    }
    if (!st) {
        const rs_opt_cfg *c = rs_optim_cfg(o);
        char lr[32];
        snprintf(lr, sizeof lr, "%.9g", (double)c->lr);
        const char *meta[] = {"format", FORMAT, "optimizer", rs_opt_kind_name(c->kind), "optim.steps", ostep,
                              "lr", lr, "train.step", step, "train.epoch", epoch};
        st = rs_st_write(opath, all, n * ns, meta, 6, err);
    }
    if (!st) st = save_weights(path, m, posmeta, 7, err);
    for (int s = 0; s < ns && s < 8; s++)
        rs_kctx_host_done(rs_optim_ctx(o), rs_optim_state(o, s), host[s], rs_optim_numel(o) * sizeof(float), false, NULL);
    free(all);
    free(names);
    free(opath);
    return st;
}

static bool meta_i64(const rs_st_file *f, const char *key, int64_t *out)
{
    const char *v = rs_st_meta(f, key);
    if (!v) return false;
    char *end;
    unsigned long long x = strtoull(v, &end, 10); /* seeds use the full u64 range */
    if (end == v || *end) return false;
    *out = (int64_t)x;
    return true;
}

static const char *const pos_keys[] = {"train.step", "train.epoch", "train.batch_in_epoch", "train.seed",
                                        "train.model_step", "train.model_seed", "train.batch"};
#define NPOS_KEYS 7

static rs_status pos_of(const rs_st_file *w, const char *path, rs_ckpt_pos *pos, rs_err *err)
{
    int64_t v[NPOS_KEYS];
    for (int i = 0; i < NPOS_KEYS; i++)
        if (!meta_i64(w, pos_keys[i], &v[i]))
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s is a weights file, not a training checkpoint (no '%s' metadata); load it with "
                              "`load` instead of resume=",
                              path, pos_keys[i]);
    pos->step = v[0];
    pos->epoch = (int)v[1];
    pos->batch_in_epoch = v[2];
    pos->data_seed = (uint64_t)v[3];
    pos->model_step = (uint64_t)v[4];
    pos->model_seed = (uint64_t)v[5];
    pos->batch = v[6];
    return RS_OK;
}

rs_status rs_ckpt_read_pos(const char *path, rs_ckpt_pos *pos, rs_err *err)
{
    rs_st_file *w = NULL;
    rs_status st = rs_st_open(path, &w, err);
    if (!st) st = pos_of(w, path, pos, err);
    rs_st_close(w);
    return st;
}

rs_status rs_ckpt_load_train(const char *path, rs_model *m, rs_optim *o, rs_ckpt_pos *pos, rs_err *err)
{
    rs_st_file *w = NULL, *f = NULL;
    char *opath = rs_ckpt_optim_path(path);
    if (!opath) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    rs_ckpt_pos p = {0};
    rs_status st = rs_st_open(path, &w, err);
    if (!st) st = check_tensors(w, m, "", err);
    if (!st) st = pos_of(w, path, &p, err);
    if (!st) {
        st = rs_st_open(opath, &f, err);
        if (st) rs_err_prefix(err, "the optimizer state of %s", path);
    }
    /* The two files are written one after the other; a crash between them leaves a pair from
     * different steps, which must not resume silently. */
    int64_t ostep_of_run = -1;
    if (!st && (!meta_i64(f, "train.step", &ostep_of_run) || ostep_of_run != p.step))
        st = rs_err_set(err, RS_ERR_FORMAT,
                        "%s holds weights of step %lld but %s holds optimizer state of step %lld: the pair was "
                        "not written together (an interrupted save?); use an earlier checkpoint",
                        path, (long long)p.step, opath, (long long)ostep_of_run);
    const char *kind = f ? rs_st_meta(f, "optimizer") : NULL;
    if (!st && (!kind || strcmp(kind, rs_opt_kind_name(rs_optim_cfg(o)->kind))))
        st = rs_err_set(err, RS_ERR_ARG, "%s holds %s state but this run uses opt=%s; resume with opt=%s", opath,
                        kind ? kind : "unknown", rs_opt_kind_name(rs_optim_cfg(o)->kind), kind ? kind : "?");
    int64_t osteps = 0;
    if (!st && !meta_i64(f, "optim.steps", &osteps))
        st = rs_err_set(err, RS_ERR_FORMAT, "%s: no 'optim.steps' metadata", opath);
    int ns = rs_optim_state_count(o), nt = rs_model_tensor_count(m);
    if (!st && rs_st_count(f) != ns * nt)
        st = rs_err_set(err, RS_ERR_ARG,
                        "%s holds %d state tensors but this optimizer keeps %d (%d per parameter); resume with "
                        "the optimizer settings of the saved run (e.g. the same momentum)",
                        opath, rs_st_count(f), ns * nt, ns);
    for (int s = 0; s < ns && !st; s++) {
        char suffix[40];
        snprintf(suffix, sizeof suffix, ".%s", rs_optim_state_name(o, s));
        for (int i = 0; i < nt && !st; i++) {
            char name[128], have[64], want[64];
            const rs_param_info *pi = rs_model_tensor(m, i);
            snprintf(name, sizeof name, "%s%s", pi->name, suffix);
            const rs_st_info *in = rs_st_find(f, name);
            if (!in) st = rs_err_set(err, RS_ERR_SHAPE, "%s has no tensor '%s'", opath, name);
            else if (in->dtype != RS_F32 || !rs_shape_eq(&in->shape, &pi->shape))
                st = rs_err_set(err, RS_ERR_SHAPE, "%s: tensor '%s' is %s %s, expected F32 %s", opath, name,
                                rs_dtype_st_name(in->dtype), rs_shape_str(&in->shape, have, sizeof have),
                                rs_shape_str(&pi->shape, want, sizeof want));
        }
    }
    float *params = st ? NULL : rs_model_params_map(m, err);
    if (!st && !params) st = err ? err->code : RS_ERR_NOMEM;
    if (!st) {
        copy_tensors(w, m, params, "");
        st = rs_model_params_unmap(m, params, true, err);
    }
    for (int s = 0; s < ns && !st; s++) {
        char suffix[40];
        snprintf(suffix, sizeof suffix, ".%s", rs_optim_state_name(o, s));
        float *h = state_host(o, rs_optim_state(o, s), rs_optim_numel(o), err);
        if (!h) st = err ? err->code : RS_ERR_NOMEM;
        else {
            copy_tensors(f, m, h, suffix);
            st = state_back(o, rs_optim_state(o, s), h, rs_optim_numel(o), err);
        }
    }
    if (!st) {
        rs_optim_set_step_count(o, osteps);
        rs_model_set_seed(m, p.model_seed);
        rs_model_set_step(m, p.model_step);
        *pos = p;
    }
    rs_st_close(w);
    rs_st_close(f);
    free(opath);
    return st;
}
