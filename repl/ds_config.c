/* DeepSpeed's ds_config.json as `train` options (see ds_config.h). One table, `keys`, says for every
 * key ringside reads what it becomes; a key not in it is refused by name, and a key whose value would
 * change the numbers in a way ringside cannot follow is refused with what ringside does instead. Keys
 * that change only printing or speed are reported as ignored. The resolved options go through the
 * same parser as typed ones (a `train` line is built and run), so a config equals its options. */
#define _GNU_SOURCE
#include "ds_config.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "call.h"
#include "lang/lex.h"
#include "repl_log.h"
#include "slog/slog.h"

int rs_cmd_train(rs_session *s, const rs_call *c); /* cmd_train.c: the resolved line runs through it */

#define DS_MAX_OPTS 40
#define DS_MAX_NOTES 24

typedef struct ds_opt {
    char name[24];   /* the train option */
    char value[96];  /* as it would be typed */
    char key[64];    /* the file's key it came from */
} ds_opt;

/* What a file resolved to, filled by the key table's functions, then by finish(). */
typedef struct ds_res {
    const rs_call *c;
    const char *file;
    ds_opt opt[DS_MAX_OPTS];
    int nopt;
    char note[DS_MAX_NOTES][280]; /* ignored keys and remarks, printed before the run */
    int nnote;
    char err[RS_ERR_MSG_MAX];     /* non-empty: refused */
    long long tbs, mbs, gas;      /* the batch keys, -1 when absent */
    long long stage, pp;          /* zero_optimization.stage, pipeline.stages; -1 when absent */
    char offload[8], partition[16];
    long long bucket;             /* reduce_bucket_size, -1 when absent */
    int overlap;                  /* overlap_comm, -1 when absent */
    char opt_type[16];
    int adam_w_mode;              /* -1 absent */
    double lr, weight_decay;      /* NAN when absent */
    char sched_type[24];
    double warm_min, warm_max, warm_steps, total_steps, warm_min_ratio, cos_min_ratio;
    char warm_type[16];
    int fp16, bf16;               /* enabled: 1; -1 absent */
    long long scale_power;        /* -1 absent */
} ds_res;

__attribute__((format(printf, 2, 3))) static bool refuse(ds_res *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return false;
}

__attribute__((format(printf, 2, 3))) static void note(ds_res *r, const char *fmt, ...)
{
    if (r->nnote == DS_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note[r->nnote++], sizeof r->note[0], fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 4, 5))) static void put(ds_res *r, const char *name, const char *key, const char *fmt,
                                                      ...)
{
    ds_opt *o = NULL;
    for (int i = 0; i < r->nopt; i++)
        if (!strcmp(r->opt[i].name, name)) o = &r->opt[i];
    if (!o && r->nopt == DS_MAX_OPTS) return;
    if (!o) o = &r->opt[r->nopt++];
    snprintf(o->name, sizeof o->name, "%s", name);
    snprintf(o->key, sizeof o->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->value, sizeof o->value, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- the keys */

static bool k_int(ds_res *r, const char *key, json_t *v, long long *out, long long lo, long long hi)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return refuse(r, "%s must be an integer %lld..%lld", key, lo, hi);
    *out = json_integer_value(v);
    return true;
}

static bool k_num(ds_res *r, const char *key, json_t *v, double *out)
{
    if (!json_is_number(v) || !isfinite(json_number_value(v))) return refuse(r, "%s must be a number", key);
    *out = json_number_value(v);
    return true;
}

static bool k_str(ds_res *r, const char *key, json_t *v, char *out, size_t cap)
{
    if (!json_is_string(v)) return refuse(r, "%s must be a string", key);
    snprintf(out, cap, "%s", json_string_value(v));
    return true;
}

static bool k_bool(ds_res *r, const char *key, json_t *v, int *out)
{
    if (!json_is_boolean(v)) return refuse(r, "%s must be true or false", key);
    *out = json_is_true(v);
    return true;
}

static bool tbs(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->tbs, 0, 1 << 30); }
static bool mbs(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->mbs, 0, 1 << 30); }
static bool gas(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->gas, 0, 1 << 30); }

static bool ignored(ds_res *r, const char *k, json_t *v, const char *why)
{
    (void)v;
    note(r, "ignored: %s (%s)", k, why);
    return true;
}
static bool steps_per_print(ds_res *r, const char *k, json_t *v)
{
    return ignored(r, k, v, "ringside prints a line per epoch and a progress bar; metrics go to the session log every step");
}
static bool wall_clock(ds_res *r, const char *k, json_t *v)
{
    return ignored(r, k, v, "across ranks ringside always prints the step time by phase and logs each collective");
}
static bool clipping(ds_res *r, const char *k, json_t *v)
{
    double x = 0;
    if (!k_num(r, k, v, &x)) return false;
    if (x < 0) return refuse(r, "%s must be >= 0 (0: off)", k);
    put(r, "clip", k, "%.9g", x);
    return true;
}

static bool opt_type(ds_res *r, const char *k, json_t *v) { return k_str(r, k, v, r->opt_type, sizeof r->opt_type); }
static bool opt_lr(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->lr); }
static bool opt_wd(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->weight_decay); }
static bool opt_adamw(ds_res *r, const char *k, json_t *v) { return k_bool(r, k, v, &r->adam_w_mode); }
static bool opt_momentum(ds_res *r, const char *k, json_t *v)
{
    double x = 0;
    if (!k_num(r, k, v, &x)) return false;
    put(r, "momentum", k, "%.9g", x);
    return true;
}
static bool opt_nesterov(ds_res *r, const char *k, json_t *v)
{
    int b = 0;
    if (!k_bool(r, k, v, &b)) return false;
    put(r, "nesterov", k, "%s", b ? "on" : "off");
    return true;
}
/* Adam's betas and eps are fixed in ringside (torch's defaults): another value would train differently. */
static bool opt_betas(ds_res *r, const char *k, json_t *v)
{
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return refuse(r, "%s must be two numbers, e.g. [0.9, 0.999]", k);
    double b1 = json_number_value(json_array_get(v, 0)), b2 = json_number_value(json_array_get(v, 1));
    if (fabs(b1 - 0.9) > 1e-12 || fabs(b2 - 0.999) > 1e-12)
        return refuse(r, "%s [%g, %g] is not honoured: ringside's Adam and AdamW use betas [0.9, 0.999] (torch's "
                      "defaults); give those or leave the key out", k, b1, b2);
    return true;
}
static bool opt_eps(ds_res *r, const char *k, json_t *v)
{
    double x = 0;
    if (!k_num(r, k, v, &x)) return false;
    if (fabs(x - 1e-8) > 1e-20)
        return refuse(r, "%s %g is not honoured: ringside's Adam and AdamW use eps 1e-8; give that or leave the key out",
                      k, x);
    return true;
}

static bool sch_type(ds_res *r, const char *k, json_t *v) { return k_str(r, k, v, r->sched_type, sizeof r->sched_type); }
static bool sch_wmin(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->warm_min); }
static bool sch_wmax(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->warm_max); }
static bool sch_wsteps(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->warm_steps); }
static bool sch_total(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->total_steps); }
static bool sch_wratio(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->warm_min_ratio); }
static bool sch_cratio(ds_res *r, const char *k, json_t *v) { return k_num(r, k, v, &r->cos_min_ratio); }
static bool sch_wtype(ds_res *r, const char *k, json_t *v) { return k_str(r, k, v, r->warm_type, sizeof r->warm_type); }

static bool fp16_on(ds_res *r, const char *k, json_t *v) { return k_bool(r, k, v, &r->fp16); }
static bool bf16_on(ds_res *r, const char *k, json_t *v) { return k_bool(r, k, v, &r->bf16); }
static bool fp16_scale(ds_res *r, const char *k, json_t *v)
{
    double x = 0;
    if (!k_num(r, k, v, &x)) return false;
    if (x != 0)
        return refuse(r, "%s %g (a static scale) is not honoured: ringside's fp16 loss scale is dynamic; give 0 "
                      "(dynamic, DeepSpeed's default) and initial_scale_power for its start", k, x);
    return true;
}
static bool fp16_power(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->scale_power, 0, 126); }
static bool fp16_window(ds_res *r, const char *k, json_t *v)
{
    long long w = 0;
    if (!k_int(r, k, v, &w, 1, 1 << 30)) return false;
    if (w != 2000)
        return refuse(r, "%s %lld is not honoured: ringside's loss scaler (torch's GradScaler) doubles the scale after "
                      "2000 finite steps; give 2000 or leave the key out", k, w);
    return true;
}
static bool fp16_hysteresis(ds_res *r, const char *k, json_t *v)
{
    long long h = 0;
    if (!k_int(r, k, v, &h, 1, 1 << 30)) return false;
    if (h != 1)
        return refuse(r, "%s %lld is not honoured: ringside halves the scale at every overflow (hysteresis 1, as "
                      "torch's GradScaler); give 1 or leave the key out", k, h);
    return true;
}
static bool fp16_min(ds_res *r, const char *k, json_t *v)
{
    return ignored(r, k, v, "ringside's loss scale has no floor; it only matters after many overflows in a row");
}

static bool z_stage(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->stage, 0, 3); }
static bool z_offload(ds_res *r, const char *k, json_t *v)
{
    char dev[16];
    if (!k_str(r, k, v, dev, sizeof dev)) return false;
    if (strcmp(dev, "none") && strcmp(dev, "cpu"))
        return refuse(r, "%s \"%s\" is not honoured: ringside offloads to \"cpu\" (host memory) or \"none\"", k, dev);
    if (!strcmp(dev, "cpu")) snprintf(r->offload, sizeof r->offload, "cpu");
    return true;
}
static bool z_pin(ds_res *r, const char *k, json_t *v)
{
    return ignored(r, k, v, "ringside's ranks run on the CPU: host memory is where the offloaded state already is");
}
static bool z_bucket(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->bucket, 1024, 1LL << 32); }
static bool z_overlap(ds_res *r, const char *k, json_t *v) { return k_bool(r, k, v, &r->overlap); }
static bool z_allgather(ds_res *r, const char *k, json_t *v)
{
    return ignored(r, k, v, "fsdp gathers one unit's parameters at a time (wrap=), not in buckets of a size");
}
static bool z_contiguous(ds_res *r, const char *k, json_t *v)
{
    return ignored(r, k, v, "ringside's gradients always live in one contiguous buffer; buckets and shards are "
                   "ranges of it");
}
static bool p_stages(ds_res *r, const char *k, json_t *v) { return k_int(r, k, v, &r->pp, 1, 4096); }
static bool p_partition(ds_res *r, const char *k, json_t *v)
{
    char m[32];
    if (!k_str(r, k, v, m, sizeof m)) return false;
    if (strcasecmp(m, "parameters") && strcasecmp(m, "uniform"))
        return refuse(r, "%s \"%s\" is not honoured: ringside cuts stages by \"parameters\" or \"uniform\" "
                      "(partition=parameters|uniform), or by measured time (partition=time on the line)", k, m);
    snprintf(r->partition, sizeof r->partition, "%s", strcasecmp(m, "uniform") ? "parameters" : "uniform");
    return true;
}

/* Every key ringside reads, once: the file's path to it, and what it does with the value. */
typedef struct ds_key {
    const char *path;
    bool (*apply)(ds_res *r, const char *key, json_t *v);
    const char *becomes; /* in ringside's terms, for `export config` readers and the docs */
} ds_key;

static const ds_key keys[] = {
    {"train_batch_size", tbs, "batch x accum (DeepSpeed's arithmetic with the data-parallel ranks)"},
    {"train_micro_batch_size_per_gpu", mbs, "batch / data-parallel ranks"},
    {"gradient_accumulation_steps", gas, "accum="},
    {"steps_per_print", steps_per_print, "(ignored)"},
    {"wall_clock_breakdown", wall_clock, "(ignored: always shown)"},
    {"gradient_clipping", clipping, "clip="},
    {"optimizer.type", opt_type, "opt=adam|adamw|sgd"},
    {"optimizer.params.lr", opt_lr, "lr="},
    {"optimizer.params.betas", opt_betas, "[0.9, 0.999] only"},
    {"optimizer.params.eps", opt_eps, "1e-8 only"},
    {"optimizer.params.weight_decay", opt_wd, "wd="},
    {"optimizer.params.adam_w_mode", opt_adamw, "Adam: true opt=adamw, false opt=adam"},
    {"optimizer.params.momentum", opt_momentum, "momentum="},
    {"optimizer.params.nesterov", opt_nesterov, "nesterov="},
    {"scheduler.type", sch_type, "WarmupLR: warmup=; WarmupCosineLR: sched=cosine"},
    {"scheduler.params.warmup_min_lr", sch_wmin, "0 only"},
    {"scheduler.params.warmup_max_lr", sch_wmax, "lr="},
    {"scheduler.params.warmup_num_steps", sch_wsteps, "warmup="},
    {"scheduler.params.warmup_type", sch_wtype, "\"linear\" only"},
    {"scheduler.params.total_num_steps", sch_total, "steps= (cosine ends at the run's last step)"},
    {"scheduler.params.warmup_min_ratio", sch_wratio, "0 only"},
    {"scheduler.params.cos_min_ratio", sch_cratio, "min_lr = lr x ratio"},
    {"fp16.enabled", fp16_on, "precision=fp16"},
    {"fp16.loss_scale", fp16_scale, "0 (dynamic) only"},
    {"fp16.initial_scale_power", fp16_power, "loss_scale=2^N"},
    {"fp16.loss_scale_window", fp16_window, "2000 only"},
    {"fp16.hysteresis", fp16_hysteresis, "1 only"},
    {"fp16.min_loss_scale", fp16_min, "(ignored)"},
    {"bf16.enabled", bf16_on, "precision=bf16"},
    {"zero_optimization.stage", z_stage, "0: mode=ddp; 1-3: mode=fsdp zero=N"},
    {"zero_optimization.offload_optimizer.device", z_offload, "offload=cpu"},
    {"zero_optimization.offload_optimizer.pin_memory", z_pin, "(ignored)"},
    {"zero_optimization.offload_param.device", z_offload, "offload=cpu"},
    {"zero_optimization.offload_param.pin_memory", z_pin, "(ignored)"},
    {"zero_optimization.reduce_bucket_size", z_bucket, "ddp: bucket="},
    {"zero_optimization.allgather_bucket_size", z_allgather, "(ignored)"},
    {"zero_optimization.overlap_comm", z_overlap, "ddp: overlap="},
    {"zero_optimization.contiguous_gradients", z_contiguous, "(ignored: always)"},
    {"pipeline.stages", p_stages, "mode=pipeline pp="},
    {"pipeline.partition_method", p_partition, "partition=parameters|uniform"},
    {"pipeline.partition", p_partition, "partition=parameters|uniform"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* Walks one object of the file: a key of the table is applied, an object that holds keys of the table
 * is walked, anything else is refused by name. */
static bool walk(ds_res *r, json_t *obj, const char *prefix)
{
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        const ds_key *k = NULL;
        bool section = false;
        size_t n = strlen(path);
        for (size_t i = 0; i < NKEYS; i++) {
            if (!strcmp(keys[i].path, path)) k = &keys[i];
            else if (!strncmp(keys[i].path, path, n) && keys[i].path[n] == '.') section = true;
        }
        if (k && !k->apply(r, path, v)) return false;
        if (!k && section && !json_is_object(v)) return refuse(r, "%s must be an object ({...})", path);
        if (!k && section && !walk(r, v, path)) return false;
        if (!k && !section)
            return refuse(r, "%s is not a key ringside reads (it would be silently dropped); remove it, or see `help "
                          "train` for what config= understands", path);
    }
    return true;
}

/* ---------------------------------------------------------------- resolving */

/* The mode the run will have and its data-parallel world, as DeepSpeed's world_size counts it. */
static const char *run_mode(ds_res *r, int *world)
{
    const rs_call *c = r->c;
    long long ranks = rs_call_int(c, "ranks", 2);
    const char *mode = rs_call_given(c, "mode") ? rs_call_str(c, "mode", "single")
                       : r->pp > 1              ? "pipeline"
                       : r->stage >= 1          ? "fsdp"
                       : r->stage == 0 || rs_call_given(c, "ranks") ? "ddp"
                                                                    : "single";
    long long tp = rs_call_given(c, "tp") ? rs_call_int(c, "tp", 1) : 1, pp = r->pp > 0 ? r->pp : 0;
    if (rs_call_given(c, "pp")) pp = rs_call_int(c, "pp", 1);
    if (!strcmp(mode, "single")) *world = 1;
    else if (!strcmp(mode, "pipeline"))
        *world = rs_call_given(c, "dp") ? (int)rs_call_int(c, "dp", 1) : (int)(pp > 0 ? ranks / (pp * tp) : 1);
    else if (!strcmp(mode, "tensor")) *world = (int)(ranks / (tp > 1 ? tp : ranks));
    else *world = (int)ranks;
    if (*world < 1) *world = 1;
    return mode;
}

/* DeepSpeed's _set_batch_related_parameters and _batch_assertion (deepspeed/runtime/config.py), with
 * its messages, then batch= (the global micro-batch) and accum=. */
static bool batch(ds_res *r, int world)
{
    long long t = r->tbs, m = r->mbs, g = r->gas;
    if (t >= 0 && m >= 0 && g >= 0) {
    } else if (t >= 0 && m >= 0) {
        g = m ? t / m / world : 0;
    } else if (t >= 0 && g >= 0) {
        m = g ? t / world / g : 0;
    } else if (m >= 0 && g >= 0) {
        t = m * g * world;
    } else if (t >= 0) {
        g = 1;
        m = t / world;
    } else if (m >= 0) {
        t = m * world;
        g = 1;
    } else {
        return refuse(r, "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
    }
    if (t <= 0) return refuse(r, "Train batch size: %lld has to be greater than 0", t);
    if (m <= 0) return refuse(r, "Micro batch size per gpu: %lld has to be greater than 0", m);
    if (g <= 0) return refuse(r, "Gradient accumulation steps: %lld has to be greater than 0", g);
    if (t != m * g * world)
        return refuse(r, "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                      "gradient_acc_step * world_size %lld != %lld * %lld * %d", t, m, g, world);
    note(r, "train_batch_size %lld = train_micro_batch_size_per_gpu %lld x gradient_accumulation_steps %lld x %d "
         "data-parallel rank%s: batch=%lld accum=%lld", t, m, g, world, world == 1 ? "" : "s", m * world, g);
    put(r, "batch", r->tbs >= 0 ? "train_batch_size" : "train_micro_batch_size_per_gpu", "%lld", m * world);
    put(r, "accum", "gradient_accumulation_steps", "%lld", g);
    return true;
}

static bool optimizer(ds_res *r)
{
    if (r->opt_type[0]) {
        const char *t = r->opt_type, *opt;
        if (!strcasecmp(t, "adam")) opt = r->adam_w_mode == 0 ? "adam" : "adamw";
        else if (!strcasecmp(t, "adamw")) opt = "adamw";
        else if (!strcasecmp(t, "sgd")) opt = "sgd";
        else return refuse(r, "optimizer.type \"%s\" is not one ringside has: Adam, AdamW or SGD", t);
        if (!strcasecmp(t, "adam") && r->adam_w_mode != 0)
            note(r, "optimizer Adam: DeepSpeed's Adam decouples weight decay unless adam_w_mode is false: opt=adamw");
        put(r, "opt", "optimizer.type", "%s", opt);
        if (strcmp(opt, "sgd") || !isnan(r->weight_decay)) /* DeepSpeed's default decay is 0, AdamW's here 0.01 */
            put(r, "wd", "optimizer.params.weight_decay", "%.9g", isnan(r->weight_decay) ? 0.0 : r->weight_decay);
    } else if (!isnan(r->weight_decay)) {
        put(r, "wd", "optimizer.params.weight_decay", "%.9g", r->weight_decay);
    }
    if (!isnan(r->lr)) put(r, "lr", "optimizer.params.lr", "%.9g", r->lr);
    return true;
}

static bool warmup(ds_res *r)
{
    if (r->warm_steps > 0 && strcasecmp(r->warm_type, "linear"))
        return refuse(r, "scheduler.params.warmup_type \"%s\" is not honoured: ringside warms up linearly; give "
                      "\"warmup_type\": \"linear\" (DeepSpeed's default is \"log\")", r->warm_type);
    if (r->warm_steps > 0) {
        put(r, "warmup", "scheduler.params.warmup_num_steps", "%.0f", r->warm_steps);
        note(r, "warm-up: ringside's lr at step k (from 0) is lr x (k+1)/%.0f, reaching lr at step %.0f; DeepSpeed's "
             "linear one is lr x k/%.0f", r->warm_steps, r->warm_steps - 1, r->warm_steps);
    }
    return true;
}

static bool scheduler(ds_res *r)
{
    const char *t = r->sched_type;
    if (!t[0]) return true;
    if (!strcasecmp(t, "WarmupLR")) {
        if (r->warm_min != 0)
            return refuse(r, "scheduler.params.warmup_min_lr %g is not honoured: ringside warms up from 0; give 0",
                          r->warm_min);
        put(r, "lr", "scheduler.params.warmup_max_lr", "%.9g", r->warm_max); /* the scheduler sets the lr */
        put(r, "sched", "scheduler.type", "constant");
        return warmup(r);
    }
    if (!strcasecmp(t, "WarmupCosineLR")) {
        if (r->warm_min_ratio != 0)
            return refuse(r, "scheduler.params.warmup_min_ratio %g is not honoured: ringside warms up from 0; give 0",
                          r->warm_min_ratio);
        if (!(r->total_steps > r->warm_steps))
            return refuse(r, "scheduler.params.total_num_steps must be given and above warmup_num_steps for "
                          "WarmupCosineLR");
        double lr = isnan(r->lr) ? 1e-3 : r->lr;
        put(r, "sched", "scheduler.type", "cosine");
        put(r, "steps", "scheduler.params.total_num_steps", "%.0f", r->total_steps);
        put(r, "min_lr", "scheduler.params.cos_min_ratio", "%.9g", lr * r->cos_min_ratio);
        note(r, "WarmupCosineLR: the run stops at total_num_steps %.0f, where ringside's cosine ends", r->total_steps);
        return warmup(r);
    }
    if (!strcasecmp(t, "WarmupDecayLR"))
        return refuse(r, "scheduler.type WarmupDecayLR (a linear decay to 0) is not one ringside has; it has "
                      "WarmupLR (warmup=) and WarmupCosineLR (sched=cosine), or sched=step on the line");
    return refuse(r, "scheduler.type \"%s\" is not one ringside reads: WarmupLR or WarmupCosineLR", t);
}

static bool precision(ds_res *r)
{
    if (r->fp16 == 1 && r->bf16 == 1) return refuse(r, "bfloat16 and fp16 modes cannot be simultaneously enabled");
    if (r->bf16 == 1) put(r, "precision", "bf16.enabled", "bf16");
    if (r->fp16 != 1) {
        if (r->scale_power >= 0) note(r, "ignored: fp16.initial_scale_power (fp16 is not enabled)");
        return true;
    }
    put(r, "precision", "fp16.enabled", "fp16");
    put(r, "loss_scale", "fp16.initial_scale_power", "%.9g", ldexp(1.0, (int)(r->scale_power >= 0 ? r->scale_power : 16)));
    note(r, "fp16: ringside's loss scaler is torch's GradScaler: the scale doubles after 2000 finite steps and "
         "halves at each overflow (DeepSpeed's defaults: loss_scale_window 1000, hysteresis 2)");
    return true;
}

/* What the layout keys become for the run's mode; a key the mode has no use for is said to be unused. */
static bool layout(ds_res *r, const char *mode, int world)
{
    bool fsdp = !strcmp(mode, "fsdp"), ddp = !strcmp(mode, "ddp"), pipe = !strcmp(mode, "pipeline");
    if (r->stage >= 1 && fsdp) put(r, "zero", "zero_optimization.stage", "%lld", r->stage);
    else if (r->stage == 1 && pipe) put(r, "zero", "zero_optimization.stage", "1");
    else if (r->stage >= 1 && pipe)
        return refuse(r, "zero_optimization.stage %lld with a pipeline: ringside's pipeline shards only the optimizer "
                      "state (stage 1)", r->stage);
    else if (r->stage >= 1) note(r, "unused: zero_optimization.stage %lld (mode=%s shards nothing)", r->stage, mode);
    if (r->offload[0] && fsdp) put(r, "offload", "zero_optimization.offload_*.device", "cpu");
    else if (r->offload[0]) note(r, "unused: offload to cpu (mode=%s; mode=fsdp offloads)", mode);
    if (r->offload[0] && fsdp)
        note(r, "offload=cpu keeps both the optimizer state and the parameter shards in host memory");
    if (r->bucket >= 0 && ddp) put(r, "bucket", "zero_optimization.reduce_bucket_size", "%lld", r->bucket);
    else if (r->bucket >= 0) note(r, "unused: zero_optimization.reduce_bucket_size (mode=ddp's bucket=)");
    if (r->overlap >= 0 && ddp) put(r, "overlap", "zero_optimization.overlap_comm", "%s", r->overlap ? "on" : "off");
    else if (r->overlap >= 0) note(r, "unused: zero_optimization.overlap_comm (mode=ddp's overlap=)");
    if (r->pp > 1 && pipe) put(r, "pp", "pipeline.stages", "%lld", r->pp);
    if (r->pp > 1 && pipe && world > 1) /* the ranks left over from the stages are data-parallel copies */
        put(r, "dp", "pipeline.stages", "%d", world);
    if (r->partition[0] && pipe) put(r, "partition", "pipeline.partition_method", "%s", r->partition);
    if (!rs_call_given(r->c, "mode") && strcmp(mode, "single")) put(r, "mode", "zero_optimization/pipeline", "%s", mode);
    const char *file_mode = r->pp > 1 ? "pipeline" : r->stage >= 1 ? "fsdp" : r->stage == 0 ? "ddp" : NULL;
    if (rs_call_given(r->c, "mode") && file_mode && strcmp(file_mode, mode))
        note(r, "the command line's mode=%s overrides %s (mode=%s)", mode,
             r->pp > 1 ? "pipeline.stages" : "zero_optimization.stage", file_mode);
    return true;
}

static bool resolve(ds_res *r, json_t *root)
{
    if (!walk(r, root, "")) return false;
    int world;
    const char *mode = run_mode(r, &world);
    return layout(r, mode, world) && batch(r, world) && optimizer(r) && scheduler(r) && precision(r);
}

/* ---------------------------------------------------------------- the resolved line */

static void append(char *line, size_t cap, const char *name, const char *value)
{
    size_t n = strlen(line);
    bool plain = value[0] != 0;
    for (const char *p = value; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:/+-*@%", *p)) plain = false;
    snprintf(line + n, cap - n, plain ? " %s=%s" : " %s=\"%s\"", name, value);
}

/* `train M on D` with the line's own options (not config=), then the file's that the line leaves. */
static void build_line(const ds_res *r, char *line, size_t cap)
{
    const rs_call *c = r->c;
    snprintf(line, cap, "%s", c->cmd->name);
    for (int i = 0; i < c->nargs; i++) snprintf(line + strlen(line), cap - strlen(line), " %s", c->args[i]);
    for (int i = 0; c->cmd->opts[i].name; i++)
        if (c->opts[i].set && strcmp(c->cmd->opts[i].name, "config")) append(line, cap, c->cmd->opts[i].name, c->opts[i].text);
    for (int i = 0; i < r->nopt; i++)
        if (!rs_call_given(c, r->opt[i].name)) append(line, cap, r->opt[i].name, r->opt[i].value);
}

int rs_ds_config_train(rs_session *s, const rs_call *c)
{
    const char *file = rs_call_str(c, "config", "");
    size_t at = rs_call_opt(c, "config")->pos, len = 7 + strlen(file);
    json_error_t je;
    json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &je); /* DeepSpeed refuses duplicate keys too */
    if (!root)
        return rs_session_error(s, c, at, len, "train: config=%s: %s (line %d)", file, je.text, je.line);
    ds_res *r = calloc(1, sizeof *r); /* owned here */
    if (!r) {
        json_decref(root);
        return rs_session_error(s, c, at, len, "train: out of memory");
    }
    *r = (ds_res){.c = c, .file = file, .tbs = -1, .mbs = -1, .gas = -1, .stage = -1, .pp = -1, .bucket = -1,
                  .overlap = -1, .adam_w_mode = -1, .lr = NAN, .weight_decay = NAN, .warm_max = 1e-3,
                  .warm_steps = 1000, .cos_min_ratio = 1e-4, .fp16 = -1, .bf16 = -1, .scale_power = -1};
    snprintf(r->warm_type, sizeof r->warm_type, "log");
    bool ok = json_is_object(root) ? resolve(r, root) : refuse(r, "the file must hold one JSON object ({...})");
    json_decref(root);
    if (!ok) {
        int rc = rs_session_error(s, c, at, len, "train: config=%s: %s", file, r->err);
        free(r);
        return rc;
    }
    for (int i = 0; i < r->nnote; i++) fprintf(s->out, "config %s: %s\n", file, r->note[i]);
    for (int i = 0; i < r->nopt; i++)
        if (rs_call_given(c, r->opt[i].name))
            fprintf(s->out, "config %s: the command line's %s=%s overrides %s (%s=%s)\n", file, r->opt[i].name,
                    rs_call_str(c, r->opt[i].name, ""), r->opt[i].key, r->opt[i].name, r->opt[i].value);
    char line[4096];
    build_line(r, line, sizeof line);
    free(r);
    fprintf(s->out, "config %s: runs as: %s\n", file, line);
    rs_log_artifact(s, file, "ds_config");
    rs_tokens t = {0};
    size_t pos = 0;
    rs_err e = {0};
    rs_call nc = {0};
    int rc;
    if (rs_lex_line(line, &t, &pos, &e)) rc = rs_session_error(s, c, at, len, "train: config=%s: %s", file, e.msg);
    else rc = rs_call_parse(s, line, &t, &nc) ? 1 : rs_cmd_train(s, &nc);
    rs_call_clear(&nc);
    rs_lex_clear(&t);
    return rc;
}

/* ---------------------------------------------------------------- export config N FILE */

typedef struct run_row {
    bool found;
    char kind[32], mode[24];
    int world;
    long long steps, id;
    json_t *options; /* owned */
} run_row;

static int take_row(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    (void)stmt;
    (void)names;
    run_row *w = ud;
    if (!values || ncols < 5) return 0;
    w->found = true;
    snprintf(w->kind, sizeof w->kind, "%s", values[0] ? values[0] : "");
    snprintf(w->mode, sizeof w->mode, "%s", values[1] ? values[1] : "single");
    w->world = values[2] ? atoi(values[2]) : 1;
    w->steps = values[3] ? atoll(values[3]) : 0;
    w->options = values[4] ? json_loads(values[4], 0, NULL) : NULL;
    w->id = ncols > 5 && values[5] ? atoll(values[5]) : 0;
    return 1;
}

static double num(json_t *o, const char *k, double def)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : json_is_boolean(v) ? json_is_true(v) : def;
}

static const char *str(json_t *o, const char *k, const char *def)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : def;
}

/* The run's data-parallel world, as DeepSpeed's world_size counts it (run_mode's, from the log). */
static int logged_world(const run_row *w)
{
    if (!strcmp(w->mode, "single")) return 1;
    if (!strcmp(w->mode, "pipeline")) {
        double dp = num(w->options, "dp", 0), pp = num(w->options, "pp", 0), tp = num(w->options, "tp", 1);
        return dp > 0 ? (int)dp : pp > 0 ? (int)(w->world / (pp * (tp > 0 ? tp : 1))) : 1;
    }
    if (!strcmp(w->mode, "tensor")) {
        double tp = num(w->options, "tp", 0);
        return tp > 0 ? (int)(w->world / tp) : 1;
    }
    return w->world > 0 ? w->world : 1;
}

static void export_sched(json_t *ds, json_t *o, long long steps, double lr, FILE *out)
{
    const char *sched = str(o, "sched", "constant");
    double warm = num(o, "warmup", 0);
    json_t *p = NULL;
    const char *type = NULL;
    if (!strcmp(sched, "constant") && warm > 0) {
        type = "WarmupLR";
        p = json_pack("{s:f, s:f, s:I, s:s}", "warmup_min_lr", 0.0, "warmup_max_lr", lr, "warmup_num_steps",
                      (json_int_t)warm, "warmup_type", "linear");
    } else if (!strcmp(sched, "cosine")) {
        type = "WarmupCosineLR";
        p = json_pack("{s:I, s:I, s:f, s:f, s:s}", "total_num_steps", (json_int_t)steps, "warmup_num_steps",
                      (json_int_t)warm, "warmup_min_ratio", 0.0, "cos_min_ratio", lr > 0 ? num(o, "min_lr", 0) / lr : 0.0,
                      "warmup_type", "linear");
    } else if (!strcmp(sched, "step")) {
        fprintf(out, "export config: sched=step has no DeepSpeed scheduler: left out of the file\n");
    }
    if (type && p) json_object_set_new(ds, "scheduler", json_pack("{s:s, s:o}", "type", type, "params", p));
    else json_decref(p);
}

/* The logged options as DeepSpeed's keys: the inverse of the table above, key by key. */
static json_t *export_json(const run_row *w, FILE *out)
{
    json_t *o = w->options, *ds = json_object();
    int world = logged_world(w);
    long long b = (long long)num(o, "batch", 64), accum = (long long)num(o, "accum", 1);
    json_object_set_new(ds, "train_batch_size", json_integer(b * accum));
    json_object_set_new(ds, "train_micro_batch_size_per_gpu", json_integer(b / world));
    json_object_set_new(ds, "gradient_accumulation_steps", json_integer(accum));
    const char *opt = str(o, "opt", "adam");
    double lr = num(o, "lr", !strcmp(opt, "sgd") ? 0.01 : 1e-3);
    json_t *params = json_pack("{s:f, s:f}", "lr", lr, "weight_decay", num(o, "wd", !strcmp(opt, "adamw") ? 0.01 : 0));
    if (strcmp(opt, "sgd")) {
        json_object_set_new(params, "betas", json_pack("[f, f]", 0.9, 0.999));
        json_object_set_new(params, "eps", json_real(1e-8));
    } else {
        json_object_set_new(params, "momentum", json_real(num(o, "momentum", 0)));
        json_object_set_new(params, "nesterov", json_boolean(num(o, "nesterov", 0) != 0));
    }
    if (!strcmp(opt, "adam")) json_object_set_new(params, "adam_w_mode", json_false());
    const char *type = !strcmp(opt, "adam") ? "Adam" : !strcmp(opt, "adamw") ? "AdamW" : "SGD";
    json_object_set_new(ds, "optimizer", json_pack("{s:s, s:o}", "type", type, "params", params));
    export_sched(ds, o, w->steps, lr, out);
    if (num(o, "clip", 0) > 0) json_object_set_new(ds, "gradient_clipping", json_real(num(o, "clip", 0)));
    const char *prec = str(o, "precision", "fp32");
    if (!strcmp(prec, "fp16"))
        json_object_set_new(ds, "fp16", json_pack("{s:b, s:i, s:i, s:i, s:i}", "enabled", 1, "loss_scale", 0,
                                                  "initial_scale_power", (int)lround(log2(num(o, "loss_scale", 65536))),
                                                  "loss_scale_window", 2000, "hysteresis", 1));
    if (!strcmp(prec, "bf16")) json_object_set_new(ds, "bf16", json_pack("{s:b}", "enabled", 1));
    json_t *z = json_pack("{s:i}", "stage", !strcmp(w->mode, "fsdp") || !strcmp(w->mode, "pipeline")
                                                ? (int)num(o, "zero", 0) : 0);
    if (!strcmp(str(o, "offload", "none"), "cpu")) {
        json_object_set_new(z, "offload_optimizer", json_pack("{s:s}", "device", "cpu"));
        json_object_set_new(z, "offload_param", json_pack("{s:s}", "device", "cpu"));
    }
    if (json_object_get(o, "bucket")) json_object_set_new(z, "reduce_bucket_size", json_integer((json_int_t)num(o, "bucket", 0)));
    if (json_object_get(o, "overlap")) json_object_set_new(z, "overlap_comm", json_boolean(num(o, "overlap", 1) != 0));
    json_object_set_new(ds, "zero_optimization", z);
    if (!strcmp(w->mode, "pipeline") && num(o, "pp", 0) > 1)
    {
        /* DeepSpeed has no cut by measured time: such a run is written as its nearest rule, and said */
        const char *part = str(o, "partition", "parameters");
        if (!strcmp(part, "time"))
            fprintf(out, "export config: partition=time has no DeepSpeed method: written as \"parameters\"\n");
        json_object_set_new(ds, "pipeline", json_pack("{s:i, s:s}", "stages", (int)num(o, "pp", 0), "partition_method",
                                                      strcmp(part, "uniform") ? "parameters" : "uniform"));
    }
    return ds;
}

int rs_ds_config_export(rs_session *s, const rs_call *c)
{
    if (c->nargs < 3)
        return rs_session_error(s, c, (size_t)-1, 0, "export config: give a run and a file: export config N ds_config.json");
    char *end;
    bool last = !strcmp(c->args[1], "last"); /* the latest training run */
    long long id = last ? 0 : strtoll(c->args[1], &end, 10);
    if (!last && (*end || id < 1))
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]),
                                "export config: '%s' is not a run number or `last` (`runs` lists them)", c->args[1]);
    if (!s->log)
        return rs_session_error(s, c, (size_t)-1, 0, "export config: there is no session log (--no-db) to read run %s from",
                                c->args[1]);
    char sql[200];
    if (last)
        snprintf(sql, sizeof sql, "SELECT kind, mode, world_size, steps, options, id FROM runs WHERE kind = 'train' "
                                  "ORDER BY id DESC LIMIT 1");
    else snprintf(sql, sizeof sql, "SELECT kind, mode, world_size, steps, options, id FROM runs WHERE id = %lld", id);
    run_row w = {0};
    rs_err e = {0};
    if (rs_slog_sql(s->log, sql, take_row, &w, &e) && !w.found)
        return rs_session_error(s, c, (size_t)-1, 0, "export config: %s", e.msg);
    if (!w.found || strcmp(w.kind, "train") || !json_is_object(w.options)) {
        json_decref(w.options);
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "export config: run %s is %s; give a train "
                                "run (`runs` lists them)", c->args[1], w.found ? "not a training run" : "not in the log");
    }
    json_t *ds = export_json(&w, s->out);
    json_decref(w.options);
    size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9);
    int bad = json_dump_file(ds, c->args[2], flags);
    char *text = bad ? NULL : json_dumps(ds, flags); /* owned here: the file, shown */
    json_decref(ds);
    if (bad)
        return rs_session_error(s, c, c->arg_pos[2], strlen(c->args[2]), "export config: cannot write %s", c->args[2]);
    rs_log_artifact(s, c->args[2], "ds_config");
    fprintf(s->out, "wrote run %lld's settings (%s on %d rank%s) to %s as DeepSpeed's keys; the ranks come from the "
                    "launcher (train ... config=%s ranks=%d):\n%s\n", w.id, w.mode, w.world, w.world == 1 ? "" : "s",
            c->args[2], c->args[2], w.world, text ? text : "");
    free(text);
    return 0;
}
