/* Checkpoints: weights saved and loaded into a fresh model give the same logits bit for bit; loading
 * the wrong file fails with a message naming the tensor and the shapes; and a run stopped at step k
 * and resumed ends with the same bytes as the run that never stopped: SGD with momentum and Adam,
 * mid-epoch and at an epoch boundary, with dropout, by max_steps, by ckpt_every and by a stop hook. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ckpt/checkpoint.h"
#include "engine/ckpt/safetensors.h"
#include "engine/data/gen/digits.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

static char dir[64];

static const char *path_in(char *buf, const char *name)
{
    snprintf(buf, 128, "%s/%s", dir, name);
    return buf;
}

static rs_model *build(const char *spec, uint64_t seed)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, seed, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    /* One thread, as the runs' threads=1: threads are each model's own, and products and conv
     * backward's sums depend on the count. */
    if (m) rs_model_set_threads(m, 1);
    return m;
}

static void report_diff(const float *x, const float *y, size_t n, const char *what)
{
    size_t ndiff = 0;
    double maxd = 0;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp(&x[i], &y[i], sizeof(float))) continue;
        if (ndiff++ < 4) fprintf(stderr, "  %s: [%zu] %.9g vs %.9g\n", what, i, (double)x[i], (double)y[i]);
        double d = x[i] > y[i] ? x[i] - y[i] : y[i] - x[i];
        maxd = d > maxd ? d : maxd;
    }
    fprintf(stderr, "  %s: %zu of %zu values differ, max |diff| %.3g\n", what, ndiff, n, maxd);
}

static bool check_same_floats(const float *x, const float *y, size_t n, const char *what)
{
    bool same = !memcmp(x, y, n * sizeof(float));
    RS_CHECK(same, "%s: not bit-identical", what);
    if (!same) report_diff(x, y, n, what);
    return same;
}

static bool check_same_weights(rs_model *a, rs_model *b, const char *what)
{
    if (!a || !b) return false;
    RS_CHECK(rs_model_numel(a) == rs_model_numel(b), "%s: %zu vs %zu values", what, rs_model_numel(a),
             rs_model_numel(b));
    if (rs_model_numel(a) != rs_model_numel(b)) return false;
    return check_same_floats(rs_model_params(a), rs_model_params(b), rs_model_numel(a), what);
}

/* Logits of the first B test samples in eval mode, copied out (caller frees). */
static float *logits_of(rs_model *m, const rs_dataset *d, int B)
{
    const float *z = NULL;
    rs_err e = {0};
    rs_model_set_training(m, false);
    rs_status st = rs_model_forward(m, d->x, B, &z, &e);
    rs_model_set_training(m, true);
    RS_CHECK(st == RS_OK, "forward: %s", e.msg);
    if (st) return NULL;
    size_t n = (size_t)B * rs_model_classes(m);
    float *out = malloc(n * sizeof *out);
    if (out) memcpy(out, z, n * sizeof *out);
    return out;
}

/* ---- weights ---- */

static void test_save_load(const rs_data_pair *d)
{
    char p[128];
    static const char *const specs[] = {
        "mlp 784-64-10 dropout=0.2 in=1x28x28",
        "seq in=1x28x28 conv(4,3,pad=1) layernorm relu maxpool(2) [ conv(8,3) relu ] flatten dropout(0.1) linear(10)",
    };
    for (int k = 0; k < 2; k++) {
        rs_model *a = build(specs[k], 1), *b = build(specs[k], 2);
        if (!a || !b) continue;
        rs_train_cfg c = rs_train_defaults();
        c.max_steps = 5;
        c.eval = false;
        c.threads = 1;
        rs_err e = {0};
        RS_CHECK(rs_train(a, d, &c, NULL, NULL, &e) == RS_OK, "%s", e.msg);
        path_in(p, "model.safetensors");
        RS_CHECK(rs_ckpt_save_model(p, a, &e) == RS_OK, "save: %s", e.msg);
        RS_CHECK(access(p, F_OK) == 0, "%s was not written", p);
        char tmp[160];
        snprintf(tmp, sizeof tmp, "%s.tmp", p);
        RS_CHECK(access(tmp, F_OK) != 0, "%s was left behind", tmp);
        /* A different seed: every value of b must come from the file. */
        RS_CHECK(memcmp(rs_model_params(a), rs_model_params(b), rs_model_numel(a) * sizeof(float)),
                 "seeds 1 and 2 start the same");
        RS_CHECK(rs_ckpt_load_model(p, b, &e) == RS_OK, "load: %s", e.msg);
        check_same_weights(a, b, "weights after load");
        float *za = logits_of(a, d->test, 32), *zb = logits_of(b, d->test, 32);
        if (za && zb) check_same_floats(za, zb, 32 * 10, "logits after load");
        free(za);
        free(zb);

        /* The file as another reader sees it: one F32 tensor per parameter with the model's names and
         * shapes, and the metadata a loader needs. */
        rs_st_file *f = NULL;
        RS_CHECK(rs_st_open(p, &f, &e) == RS_OK, "%s", e.msg);
        if (f) {
            RS_CHECK(rs_st_count(f) == rs_model_tensor_count(a), "%d tensors in the file, model has %d", rs_st_count(f),
                     rs_model_tensor_count(a));
            for (int i = 0; i < rs_model_tensor_count(a); i++) {
                const rs_param_info *pi = rs_model_tensor(a, i);
                const rs_st_info *in = rs_st_find(f, pi->name);
                RS_CHECK(in && in->dtype == RS_F32 && rs_shape_eq(&in->shape, &pi->shape), "tensor %s in the file",
                         pi->name);
                if (in && in->nbytes == pi->numel * sizeof(float))
                    RS_CHECK(!memcmp(rs_st_data(f, in), rs_model_params(a) + pi->offset, in->nbytes),
                             "tensor %s: other bytes", pi->name);
            }
            const char *fmt = rs_st_meta(f, "format"), *model = rs_st_meta(f, "model");
            RS_CHECK(fmt && !strcmp(fmt, "ringside-1"), "format metadata '%s'", fmt ? fmt : "(none)");
            char *spec = rs_model_spec(a);
            RS_CHECK(model && spec && !strcmp(model, spec), "model metadata '%s', want '%s'", model ? model : "(none)",
                     spec ? spec : "");
            free(spec);
            RS_CHECK(rs_st_meta(f, "train.step") == NULL, "a weights file has no train.step");
        }
        rs_st_close(f);

        /* rs_ckpt_read_spec gives the spec back; it rebuilds the same model, which loads the file. */
        char *spec = rs_ckpt_read_spec(p, &e);
        RS_CHECK(spec != NULL, "read_spec: %s", e.msg);
        rs_model *r = spec ? build(spec, 3) : NULL;
        if (r) {
            RS_CHECK(rs_model_tensor_count(r) == rs_model_tensor_count(a) && rs_model_numel(r) == rs_model_numel(a),
                     "rebuilt from '%s': %d tensors, %zu values", spec, rs_model_tensor_count(r), rs_model_numel(r));
            RS_CHECK(rs_ckpt_load_model(p, r, &e) == RS_OK, "load into the rebuilt model: %s", e.msg);
            check_same_weights(a, r, "rebuilt from the spec");
            float *za2 = logits_of(a, d->test, 16), *zr = logits_of(r, d->test, 16);
            if (za2 && zr) check_same_floats(za2, zr, 16 * 10, "logits of the rebuilt model");
            free(za2);
            free(zr);
        }
        free(spec);
        rs_model_free(r);
        rs_model_free(a);
        rs_model_free(b);
    }
}

/* A model of sibling blocks ([ a ] [ b ], the shape of stacked stages) rebuilt from its checkpoint. */
static void test_read_spec_blocks(void)
{
    char p[128];
    rs_err e = {0};
    rs_model *a = build("seq in=1x12x12 [ conv(4,3) relu ] [ conv(4,3) relu ] flatten linear(10)", 1);
    if (!a) return;
    path_in(p, "blocks.safetensors");
    RS_CHECK(rs_ckpt_save_model(p, a, &e) == RS_OK, "%s", e.msg);
    char *spec = rs_ckpt_read_spec(p, &e);
    rs_model *r = spec ? build(spec, 1) : NULL;
    if (r) {
        rs_status st = rs_ckpt_load_model(p, r, &e);
        RS_CHECK(st == RS_OK, "model with sibling blocks rebuilt from its spec '%s' cannot load its own checkpoint: %s",
                 spec, e.msg);
    }
    free(spec);
    rs_model_free(r);
    rs_model_free(a);
}

/* spec_file's model saved, loaded into spec_model: must fail with every `want` in the message, and
 * leave the model as it was. */
static void check_load_error(const char *spec_file, const char *spec_model, const char *const *want, int nwant)
{
    char p[128];
    rs_err e = {0};
    rs_model *f = build(spec_file, 1), *m = build(spec_model, 2);
    if (!f || !m) goto done;
    path_in(p, "other.safetensors");
    RS_CHECK(rs_ckpt_save_model(p, f, &e) == RS_OK, "%s", e.msg);
    size_t n = rs_model_numel(m);
    float *before = malloc(n * sizeof *before);
    if (!before) goto done;
    memcpy(before, rs_model_params(m), n * sizeof *before);
    rs_err_clear(&e);
    rs_status st = rs_ckpt_load_model(p, m, &e);
    RS_CHECK(st != RS_OK, "'%s' loaded into '%s'", spec_file, spec_model);
    for (int i = 0; i < nwant; i++)
        RS_CHECK(strstr(e.msg, want[i]) != NULL, "'%s' into '%s': message '%s' lacks '%s'", spec_file, spec_model,
                 e.msg, want[i]);
    RS_CHECK(!memcmp(before, rs_model_params(m), n * sizeof *before), "a failed load changed the model");
    printf("  %s\n", e.msg);
    free(before);
done:
    rs_model_free(f);
    rs_model_free(m);
}

static void test_load_errors(void)
{
    printf("load errors:\n");
    /* Shape: the tensor, the shape in the file, the shape the model expects. */
    static const char *const shape[] = {"tensor '0.weight'", "has shape (128, 784)", "expects (64, 784)"};
    check_load_error("mlp 784-128-10", "mlp 784-64-10", shape, 3);
    static const char *const conv[] = {"tensor '0.weight'", "(8, 1, 3, 3)", "(8, 1, 5, 5)"};
    check_load_error("seq in=1x12x12 conv(8,3) flatten linear(10)", "seq in=1x12x12 conv(8,5) flatten linear(10)", conv,
                     3);
    /* Missing: the model needs 0.bias, the file has none. */
    static const char *const missing[] = {"no tensor '0.bias'", "(64)"};
    check_load_error("seq in=784 linear(64,bias=0) relu linear(10)", "mlp 784-64-10", missing, 2);
    /* Extra: the file has 0.bias, the model has no place for it. */
    static const char *const extra[] = {"tensor '0.bias'", "(64)", "does not have"};
    check_load_error("mlp 784-64-10", "seq in=784 linear(64,bias=0) relu linear(10)", extra, 3);

    /* Not a file, not safetensors. */
    char p[128];
    rs_err e = {0};
    rs_model *m = build("mlp 784-64-10", 1);
    if (m) {
        RS_CHECK(rs_ckpt_load_model(path_in(p, "nonexistent.safetensors"), m, &e) == RS_ERR_IO &&
                     strstr(e.msg, "nonexistent.safetensors"),
                 "missing file: %s", e.msg);
        FILE *fp = fopen(path_in(p, "junk.safetensors"), "wb");
        if (fp) {
            fputs("this is not a checkpoint", fp);
            fclose(fp);
        }
        RS_CHECK(rs_ckpt_load_model(p, m, &e) == RS_ERR_FORMAT, "junk file: %s", e.msg);
        printf("  %s\n", e.msg);
    }
    rs_model_free(m);
}

/* ---- training checkpoints and resume ---- */

static bool copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[1 << 14];
    size_t n;
    bool ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out)) ok = false;
    return ok;
}

/* Hooks of the interrupted run: stop after `at` steps, or copy the checkpoint written at step `snap`. */
typedef struct run_hooks {
    int64_t at, snap, steps;
    int ckpt_events;
    bool copied;
    char snap_path[128];
} run_hooks;

static void on_event(void *ud, const rs_train_event *ev)
{
    run_hooks *s = ud;
    if (ev->kind == RS_TRAIN_EV_STEP) s->steps = ev->step;
    if (ev->kind != RS_TRAIN_EV_CKPT) return;
    s->ckpt_events++;
    if (s->snap && ev->step == s->snap) {
        char *o1 = rs_ckpt_optim_path(ev->path), *o2 = rs_ckpt_optim_path(s->snap_path);
        s->copied = o1 && o2 && copy_file(ev->path, s->snap_path) && copy_file(o1, o2);
        free(o1);
        free(o2);
    }
}

static bool should_stop(void *ud)
{
    run_hooks *s = ud;
    return s->at && s->steps >= s->at;
}

#define EPOCHS 3
#define BATCH 64
#define K 30 /* 650 samples: 11 batches an epoch (the last of 10), so 30 steps end inside epoch 3 */
#define BATCHES 11

static rs_train_cfg run_cfg(rs_opt_kind opt)
{
    rs_train_cfg c = rs_train_defaults();
    c.opt = rs_opt_defaults(opt);
    if (opt == RS_OPT_SGD) {
        c.opt.lr = 0.05f;
        c.opt.momentum = 0.9f;
    }
    /* A schedule that depends on the step: a resume that lost its place would show. */
    c.sched = (rs_sched){.kind = RS_SCHED_COSINE, .warmup = 3, .min_lr = 0};
    c.epochs = EPOCHS;
    c.batch = BATCH;
    c.threads = 1;
    c.seed = 5;
    c.max_steps = K;
    return c;
}

static rs_status train(rs_model *m, const rs_data_pair *d, const rs_train_cfg *c, run_hooks *s, rs_train_result *r)
{
    rs_err e = {0};
    rs_train_hooks h = {.on_event = on_event, .should_stop = should_stop, .ud = s};
    rs_status st = rs_train(m, d, c, s ? &h : NULL, r, &e);
    RS_CHECK(st == RS_OK, "train: %s", e.msg);
    return st;
}

typedef enum how { BY_MAX_STEPS, BY_CKPT_EVERY, BY_STOP_HOOK } how;

/* The run that never stopped vs one stopped after k steps and resumed into a new model built with
 * resume_seed. */
static void check_resume(const rs_data_pair *d, const char *spec, rs_opt_kind opt, int64_t k, how by,
                         uint64_t resume_seed)
{
    static const char *const hows[] = {"max_steps", "ckpt_every", "stop hook"};
    char what[256], p[128];
    snprintf(what, sizeof what, "%s, %s, checkpoint at step %lld by %s, resumed into seed %llu", spec,
             rs_opt_kind_name(opt), (long long)k, hows[by], (unsigned long long)resume_seed);
    rs_model *a = build(spec, 42), *b = build(spec, 42), *c = build(spec, resume_seed);
    if (!a || !b || !c) goto done;

    rs_train_cfg full = run_cfg(opt);
    train(a, d, &full, NULL, NULL);

    rs_train_cfg part = run_cfg(opt);
    part.ckpt_path = path_in(p, "run.safetensors");
    run_hooks h = {0};
    const char *ckpt = p;
    if (by == BY_MAX_STEPS) {
        part.max_steps = k;
        part.sched.total = K; /* the same curve as the full run, whose total is its K steps */
    } else if (by == BY_CKPT_EVERY) {
        part.ckpt_every = k; /* the run goes on to K; the checkpoint of step k is copied aside */
        h.snap = k;
        ckpt = path_in(h.snap_path, "snap.safetensors");
    } else {
        h.at = k;
    }
    rs_train_result rb;
    if (train(b, d, &part, &h, &rb)) goto done;
    RS_CHECK(h.ckpt_events >= 1, "%s: no checkpoint event", what);
    if (by == BY_CKPT_EVERY) {
        RS_CHECK(h.copied, "%s: no checkpoint at step %lld", what, (long long)k);
        RS_CHECK(h.ckpt_events == (int)((K + k - 1) / k), "%s: %d checkpoints, want %lld", what, h.ckpt_events,
                 (long long)((K + k - 1) / k));
        /* Checkpointing changes nothing in the run itself. */
        check_same_weights(a, b, "run with ckpt_every vs without");
    } else {
        RS_CHECK(rb.global_step == k && rs_model_step(b) == (uint64_t)k, "%s: stopped at step %lld, model step %llu",
                 what, (long long)rb.global_step, (unsigned long long)rs_model_step(b));
        RS_CHECK(by != BY_STOP_HOOK || rb.stopped, "%s: the result does not say stopped", what);
    }

    /* The position the checkpoint records. */
    rs_st_file *f = NULL;
    rs_err e = {0};
    if (rs_st_open(ckpt, &f, &e) == RS_OK) {
        const char *step = rs_st_meta(f, "train.step"), *epoch = rs_st_meta(f, "train.epoch"),
                   *batch = rs_st_meta(f, "train.batch_in_epoch"), *mstep = rs_st_meta(f, "train.model_step");
        char want_step[32], want_epoch[32], want_batch[32];
        snprintf(want_step, sizeof want_step, "%lld", (long long)k);
        snprintf(want_epoch, sizeof want_epoch, "%lld", (long long)(k / BATCHES));
        snprintf(want_batch, sizeof want_batch, "%lld", (long long)(k % BATCHES));
        RS_CHECK(step && epoch && batch && mstep && !strcmp(step, want_step) && !strcmp(epoch, want_epoch) &&
                     !strcmp(batch, want_batch) && !strcmp(mstep, want_step),
                 "%s: checkpoint at step %s epoch %s batch %s model step %s, want %s %s %s %s", what, step ? step : "-",
                 epoch ? epoch : "-", batch ? batch : "-", mstep ? mstep : "-", want_step, want_epoch, want_batch,
                 want_step);
    } else {
        RS_CHECK(false, "%s: %s", what, e.msg);
    }
    rs_st_close(f);

    rs_train_cfg rest = run_cfg(opt);
    rest.resume = ckpt;
    rs_train_result rc;
    if (train(c, d, &rest, NULL, &rc)) goto done;
    RS_CHECK(rc.steps == K - k && rc.global_step == K, "%s: resumed run did %lld steps (global %lld), want %lld", what,
             (long long)rc.steps, (long long)rc.global_step, (long long)(K - k));
    RS_CHECK(rs_model_step(c) == rs_model_step(a), "%s: model step %llu vs %llu", what,
             (unsigned long long)rs_model_step(c), (unsigned long long)rs_model_step(a));
    if (check_same_weights(a, c, what)) printf("  ok: %s\n", what);
done:
    rs_model_free(a);
    rs_model_free(b);
    rs_model_free(c);
}

static void test_resume(const rs_data_pair *d)
{
    printf("resume:\n");
    static const char *const specs[] = {
        "mlp 784-32-10 dropout=0.3 in=1x28x28",
        "seq in=1x28x28 conv(4,3,pad=1) relu maxpool(2) dropout(0.25) flatten linear(10)",
    };
    for (int s = 0; s < 2; s++)
        for (int o = 0; o < 2; o++) {
            rs_opt_kind opt = o ? RS_OPT_ADAM : RS_OPT_SGD;
            check_resume(d, specs[s], opt, 15, BY_MAX_STEPS, 42); /* inside epoch 2 */
            check_resume(d, specs[s], opt, 22, BY_MAX_STEPS, 42); /* at the end of epoch 2 */
        }
    check_resume(d, specs[0], RS_OPT_ADAM, 11, BY_CKPT_EVERY, 42); /* checkpoint in the loop, epoch boundary */
    check_resume(d, specs[0], RS_OPT_ADAM, 7, BY_CKPT_EVERY, 42);
    check_resume(d, specs[0], RS_OPT_SGD, 13, BY_STOP_HOOK, 42); /* Ctrl-C, then resume */
    check_resume(d, specs[1], RS_OPT_ADAM, 11, BY_STOP_HOOK, 42); /* Ctrl-C right after an epoch */
    /* Resuming is typically done in a new session, where the model is rebuilt from the checkpoint's spec
     * with whatever seed that session has: the checkpoint must carry everything the rest of the run
     * depends on, the dropout masks included. */
    check_resume(d, specs[0], RS_OPT_ADAM, 15, BY_MAX_STEPS, 1234);
    check_resume(d, "mlp 784-32-10 in=1x28x28", RS_OPT_ADAM, 15, BY_MAX_STEPS, 1234); /* no dropout */
}

static void test_train_ckpt_errors(const rs_data_pair *d)
{
    printf("training checkpoint errors:\n");
    char p[128], w[128], po[128];
    rs_err e = {0};
    const char *spec = "mlp 784-32-10 in=1x28x28";
    rs_model *m = build(spec, 1), *m2 = build(spec, 1);
    rs_optim *adam = NULL, *sgd = NULL;
    if (!m || !m2) goto done;
    rs_train_cfg c = run_cfg(RS_OPT_ADAM);
    c.max_steps = 4;
    c.sched.kind = RS_SCHED_CONSTANT;
    c.ckpt_path = path_in(p, "t.safetensors");
    if (train(m, d, &c, NULL, NULL)) goto done;

    /* The state file sits beside the weights, per tensor, as torch names it. */
    char *op = rs_ckpt_optim_path(p);
    RS_CHECK(op && !strcmp(op, path_in(po, "t.optim.safetensors")), "optim path '%s'", op ? op : "(null)");
    char *op2 = rs_ckpt_optim_path("dir/x.bin");
    RS_CHECK(op2 && !strcmp(op2, "dir/x.bin.optim.safetensors"), "optim path of x.bin: '%s'", op2 ? op2 : "(null)");
    free(op2);
    rs_st_file *f = NULL;
    if (op && rs_st_open(op, &f, &e) == RS_OK) {
        /* layer 0 is the flatten */
        const rs_st_info *ea = rs_st_find(f, "1.weight.exp_avg"), *eq = rs_st_find(f, "3.bias.exp_avg_sq");
        RS_CHECK(ea && ea->shape.ndim == 2 && ea->shape.d[0] == 32 && ea->shape.d[1] == 784, "1.weight.exp_avg");
        RS_CHECK(eq && eq->shape.ndim == 1 && eq->shape.d[0] == 10, "3.bias.exp_avg_sq");
        RS_CHECK(rs_st_count(f) == 2 * rs_model_tensor_count(m), "%d state tensors", rs_st_count(f));
        const char *k = rs_st_meta(f, "optimizer"), *n = rs_st_meta(f, "optim.steps");
        RS_CHECK(k && !strcmp(k, "adam") && n && !strcmp(n, "4"), "optimizer '%s' steps '%s'", k ? k : "-", n ? n : "-");
    } else {
        RS_CHECK(false, "optimizer file: %s", e.msg);
    }
    rs_st_close(f);
    free(op);

    /* The weights of a training checkpoint load as a plain model. */
    RS_CHECK(rs_ckpt_load_model(p, m2, &e) == RS_OK, "weights of a training checkpoint: %s", e.msg);
    check_same_weights(m, m2, "weights of a training checkpoint");

    /* A weights-only file is not a training checkpoint: directly and through resume=. */
    path_in(w, "weights.safetensors");
    RS_CHECK(rs_ckpt_save_model(w, m, &e) == RS_OK, "%s", e.msg);
    rs_opt_cfg oc = rs_opt_defaults(RS_OPT_ADAM);
    adam = rs_optim_new(&oc, rs_device_cpu(), rs_model_numel(m), NULL, &e);
    rs_ckpt_pos pos;
    rs_err_clear(&e);
    RS_CHECK(adam && rs_ckpt_load_train(w, m2, adam, &pos, &e) == RS_ERR_FORMAT &&
                 strstr(e.msg, "not a training checkpoint") && strstr(e.msg, "weights.safetensors"),
             "weights-only file: '%s'", e.msg);
    printf("  %s\n", e.msg);
    rs_train_cfg r = run_cfg(RS_OPT_ADAM);
    r.resume = w;
    rs_err_clear(&e);
    RS_CHECK(rs_train(m2, d, &r, NULL, NULL, &e) != RS_OK && strstr(e.msg, "not a training checkpoint"),
             "resume= of a weights file: '%s'", e.msg);

    /* Adam's state resumed with SGD. */
    oc = rs_opt_defaults(RS_OPT_SGD);
    oc.momentum = 0.9f;
    sgd = rs_optim_new(&oc, rs_device_cpu(), rs_model_numel(m), NULL, &e);
    rs_err_clear(&e);
    RS_CHECK(sgd && rs_ckpt_load_train(p, m2, sgd, &pos, &e) != RS_OK && strstr(e.msg, "adam") &&
                 strstr(e.msg, "opt=sgd"),
             "adam state into sgd: '%s'", e.msg);
    printf("  %s\n", e.msg);

    /* The right optimizer: the position comes back. */
    rs_err_clear(&e);
    RS_CHECK(adam && rs_ckpt_load_train(p, m2, adam, &pos, &e) == RS_OK, "load_train: %s", e.msg);
    RS_CHECK(pos.step == 4 && pos.epoch == 0 && pos.batch_in_epoch == 4 && pos.data_seed == 5 && pos.model_step == 4,
             "position: step %lld epoch %d batch %lld seed %llu model step %llu", (long long)pos.step, pos.epoch,
             (long long)pos.batch_in_epoch, (unsigned long long)pos.data_seed, (unsigned long long)pos.model_step);
    RS_CHECK(adam && rs_optim_step_count(adam) == 4, "optimizer step count %lld",
             adam ? (long long)rs_optim_step_count(adam) : -1LL);

    /* Another data seed: the order would differ, so it is refused and the message says which seed. */
    r = run_cfg(RS_OPT_ADAM);
    r.resume = p;
    r.seed = 6;
    rs_err_clear(&e);
    RS_CHECK(rs_train(m2, d, &r, NULL, NULL, &e) != RS_OK && strstr(e.msg, "seed=5"), "resume with seed 6: '%s'",
             e.msg);
    printf("  %s\n", e.msg);

    /* Weights and state of different steps (a crash between the two writes leaves the new state beside
     * the old weights): refused, not resumed from a mixture. */
    char old[128];
    path_in(old, "t4.safetensors");
    RS_CHECK(copy_file(p, old), "copy %s", p);
    c.max_steps = 8;
    c.resume = p;
    if (train(m, d, &c, NULL, NULL) == RS_OK) {
        RS_CHECK(copy_file(old, p), "copy %s back", old);
        rs_err_clear(&e);
        rs_status st = adam ? rs_ckpt_load_train(p, m2, adam, &pos, &e) : RS_ERR_ARG;
        RS_CHECK(st != RS_OK, "weights of step 4 with optimizer state of step 8 were accepted (step %lld, optimizer "
                 "steps %lld)", (long long)pos.step, adam ? (long long)rs_optim_step_count(adam) : -1LL);
        if (st) printf("  %s\n", e.msg);
    }

    /* The optimizer file gone. */
    unlink(po);
    rs_err_clear(&e);
    RS_CHECK(adam && rs_ckpt_load_train(p, m2, adam, &pos, &e) == RS_ERR_IO && strstr(e.msg, "optimizer state") &&
                 strstr(e.msg, "t.optim.safetensors"),
             "missing optimizer file: '%s'", e.msg);
    printf("  %s\n", e.msg);
done:
    rs_optim_free(adam);
    rs_optim_free(sgd);
    rs_model_free(m);
    rs_model_free(m2);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/rs-ckpt-test-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    rs_data_pair d = {0};
    rs_err e = {0};
    if (rs_data_digits_pair(650, 100, 3, &d, &e) != RS_OK) {
        fprintf(stderr, "digits: %s\n", e.msg);
        return 1;
    }
    test_save_load(&d);
    test_read_spec_blocks();
    test_load_errors();
    test_train_ckpt_errors(&d);
    test_resume(&d);
    rs_data_pair_clear(&d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return rs_test_finish("engine-checkpoint");
}
