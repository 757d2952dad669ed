/* A model into a Triton repository (see repo_write.h). */
#include "repo_write.h"

#include <jansson.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "engine/ckpt/checkpoint.h"
#include "onnx/export.h"
#include "repo.h"

static rs_status mkdir_ok(const char *p, rs_err *err)
{
    if (mkdir(p, 0755) && errno != EEXIST) return rs_err_set(err, RS_ERR_IO, "%s: %s", p, strerror(errno));
    return RS_OK;
}

static rs_status copy_file(const char *from, const char *to, rs_err *err)
{
    FILE *a = fopen(from, "rb");
    if (!a) return rs_err_set(err, RS_ERR_IO, "%s: %s", from, strerror(errno));
    FILE *b = fopen(to, "wb");
    if (!b) {
        fclose(a);
        return rs_err_set(err, RS_ERR_IO, "%s: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    bool ok = true;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0) ok &= fwrite(buf, 1, n, b) == n;
    ok &= !ferror(a);
    fclose(a);
    ok &= fclose(b) == 0;
    return ok ? RS_OK : rs_err_set(err, RS_ERR_IO, "copying %s to %s failed", from, to);
}

/* NAME checked, then REPO/NAME/1 made; dir gets REPO/NAME. Every writer starts here. */
static rs_status version_dir(const char *repo, const char *name, char *dir, size_t cap, rs_err *err)
{
    if (!rs_serve_name_ok(name))
        return rs_err_set(err, RS_ERR_ARG, "'%.60s' is not a model name (letters, digits, '_', '-', '.')", name);
    char p[4200];
    snprintf(dir, cap, "%s/%s", repo, name);
    rs_status st = mkdir_ok(repo, err);
    if (!st) st = mkdir_ok(dir, err);
    snprintf(p, sizeof p, "%s/1", dir);
    if (!st) st = mkdir_ok(p, err);
    return st;
}

/* DIR/config.pbtxt from c. */
static rs_status write_config(const char *dir, const rs_serve_config *c, rs_err *err)
{
    char p[4200];
    char *text = rs_serve_config_write(c);
    if (!text) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    snprintf(p, sizeof p, "%s/config.pbtxt", dir);
    FILE *f = fopen(p, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok &= fclose(f) == 0;
    free(text);
    return ok ? RS_OK : rs_err_set(err, RS_ERR_IO, "%s: cannot write", p);
}

/* c = base named NAME on PLATFORM with the tensors as the file at path states them, read back through
 * the loader the server uses (so a file the server would refuse is refused here); *max_batch, when
 * asked, the largest batch the file runs. */
static rs_status config_from_file(const char *path, const char *name, const rs_serve_config *base,
                                  const char *platform, rs_serve_config *c, int *max_batch, rs_err *err)
{
    rs_serve_backend *b;
    rs_status st = rs_serve_backend_load(path, &b, err);
    if (st) return st;
    *c = *base;
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->platform, sizeof c->platform, "%s", platform);
    rs_serve_ios io;
    rs_serve_backend_ios(b, &io);
    c->ninputs = io.nin;
    c->noutputs = io.nout;
    memcpy(c->inputs, io.in, sizeof io.in);
    memcpy(c->outputs, io.out, sizeof io.out);
    if (max_batch) *max_batch = rs_serve_backend_max_batch(b);
    rs_serve_backend_free(b);
    return RS_OK;
}

rs_status rs_serve_repo_write(const char *repo, const char *name, rs_model *m, const char *onnx,
                              const rs_serve_config *base, rs_err *err)
{
    char dir[4096], p[4200];
    rs_status st = version_dir(repo, name, dir, sizeof dir, err);
    snprintf(p, sizeof p, "%s/1/model.onnx", dir);
    if (!st) st = m ? rs_onnx_export(m, p, 0, err) : copy_file(onnx, p, err);
    if (st) return st;
    if (m) {
        char w[4200];
        snprintf(w, sizeof w, "%s/1/model.safetensors", dir);
        st = rs_ckpt_save_model(w, m, err);
        if (st) return st;
    }
    rs_serve_config c;
    st = config_from_file(p, name, base, base->platform[0] ? base->platform : "onnxruntime_onnx", &c, NULL, err);
    if (st) return st;
    return write_config(dir, &c, err);
}

rs_status rs_serve_repo_write_gpt(const char *repo, const char *name, rs_model *m, const uint8_t *chars, int nchars,
                                  const rs_serve_config *base, rs_err *err)
{
    if (nchars != rs_model_vocab(m))
        return rs_err_set(err, RS_ERR_ARG, "the vocabulary has %d characters, the model %d", nchars, rs_model_vocab(m));
    char dir[4096], p[4200];
    rs_status st = version_dir(repo, name, dir, sizeof dir, err);
    snprintf(p, sizeof p, "%s/1/model.onnx", dir);
    remove(p); /* an earlier export of another model would be served instead of the weights */
    snprintf(p, sizeof p, "%s/1/model.safetensors", dir);
    if (!st) st = rs_ckpt_save_model(p, m, err);
    if (st) return st;
    snprintf(p, sizeof p, "%s/1/vocab.json", dir);
    json_t *ids = json_array(), *doc = json_pack("{s:o}", "chars", ids); /* doc owns ids */
    bool ok = ids && doc;
    for (int i = 0; ok && i < nchars; i++) ok = json_array_append_new(ids, json_integer(chars[i])) == 0;
    ok = ok && json_dump_file(doc, p, 0) == 0;
    json_decref(doc);
    if (!ok) return rs_err_set(err, RS_ERR_IO, "%s: cannot write", p);
    rs_serve_config c;
    rs_serve_config_init(&c);
    snprintf(c.name, sizeof c.name, "%s", name);
    snprintf(c.backend, sizeof c.backend, "ringside_gpt");
    c.instance_count = base->instance_count;
    c.decoupled = true;
    c.ninputs = c.noutputs = 1;
    snprintf(c.inputs[0].name, sizeof c.inputs[0].name, "text_input");
    snprintf(c.outputs[0].name, sizeof c.outputs[0].name, "text_output");
    c.inputs[0].dtype = c.outputs[0].dtype = RS_SERVE_STRING;
    c.inputs[0].rank = c.outputs[0].rank = 1;
    c.inputs[0].dims[0] = c.outputs[0].dims[0] = 1;
    return write_config(dir, &c, err);
}

rs_status rs_serve_repo_write_plan(const char *repo, const char *name, const rs_plan *plan, const char *file,
                                   const rs_serve_config *base, rs_err *err)
{
    char dir[4096], p[4200];
    rs_status st = version_dir(repo, name, dir, sizeof dir, err);
    snprintf(p, sizeof p, "%s/1/model.onnx", dir);
    remove(p); /* an earlier export would be served instead of the plan */
    snprintf(p, sizeof p, "%s/1/model.plan", dir);
    if (!st) st = plan ? rs_plan_save(plan, p, err) : copy_file(file, p, err);
    if (st) return st;
    /* read back through the server's loader: a plan for another ISA is refused here, before serving */
    rs_serve_config c;
    int pb;
    st = config_from_file(p, name, base, "ringside_plan", &c, &pb, err);
    if (st) return st;
    c.backend[0] = 0;
    if (c.max_batch_size > pb)
        return rs_err_set(err, RS_ERR_ARG, "max_batch=%d is larger than the batch %d the plan was compiled for (1..%d "
                          "would work, or compile with batch=%d)", c.max_batch_size, pb, pb, c.max_batch_size);
    return write_config(dir, &c, err);
}
