/* Pipeline parallelism as a training strategy (mode=pipeline): the model's layers cut into P*V
 * contiguous stages (pipe_split.h), rank r running stages r, r+P, ...; each global batch split into
 * M micro-batches that flow through the stages in the order of the schedule (pipe_sched.h), executed
 * by pipe_run.h with activations going forward and gradients back over the process group. Every rank
 * reads the whole global batch (the first stage needs the inputs, the last the labels); the loss lives
 * on the last stage, each micro-batch's scaled by its share of the batch, so the gradients summed over
 * the micro-batches are the batch's; the optimizer steps once per batch on each stage's own range of
 * the flat buffers. A parameter read by a stage on another rank than the one that owns it (GPT-2's
 * head reads the token embedding) has its two gradient contributions summed on both ranks before the
 * step, as Megatron-LM does, so both copies stay equal. Evaluation and checkpoints see the whole model:
 * gather() brings every stage's range to rank 0. Activation sets are the strategy's own, one per
 * micro-batch in flight per stage, so the ACTS pool shows what the schedule holds: GPipe all M,
 * 1F1B at most P - rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "engine/optim/optim.h"
#include "pipe_run.h"
#include "pipe_split.h"
#include "registry.h"

typedef struct chunk {
    int stage, first, last; /* layers [first, last) */
    size_t off, len;        /* the parameters it owns: [off, off+len) of the flat buffers */
    rs_optim *opt;          /* NULL when it owns none */
    rs_acts **sets;         /* (nsets) allocated activation sets; busy[] those in use */
    bool *busy;
    size_t *bytes;          /* what each set took from the ACTS pool, measured when it was made */
    int nsets;
} chunk;

/* A parameter read on this rank and owned on another (or the reverse): its gradient is summed with
 * the peer's before the step. */
typedef struct tie {
    size_t off, numel;
    int peer;
    bool reader;            /* this rank reads it (and keeps a copy with its own optimizer) */
    rs_optim *opt;          /* reader: the optimizer of the copy */
} tie;

typedef struct pipe {
    rs_pg *g;
    rs_model *m;
    rs_mem *mem;
    rs_pipe_kind kind;
    int P, V, S, M, rank;
    int *cuts;              /* (S+1) */
    chunk *ch;              /* (V) */
    tie *ties;
    int nties;
    float *tie_buf;         /* COMM: the peer's contribution while summing */
    size_t tie_max;
    rs_pipe_exec *ex;
    rs_strategy_ctx ctx;
    int64_t step;
    rs_opt_cfg optcfg;
    int batch_cap;          /* rows of a micro-batch's activation set */
    /* the current forward_backward */
    const void *x;
    const int32_t *y;
    int B, Meff;
    float loss_scale;
    int *rows, *row0;       /* (M) */
    double loss;
    rs_acts **held;         /* (M * V): the set of micro-batch m on chunk c */
    float *logits;          /* (B * rows * classes) SCRATCH: what the loop counts accuracy from */
    size_t logits_n;
    uint64_t step_base;     /* the model's step before this batch: micro-batch m draws step_base + m + 1 */
    /* activations in flight, measured: the bytes of the sets in use plus the received stage inputs,
     * their peak during a step, and the sets' count */
    size_t acts_now, acts_peak, set_bytes;
    int sets_held, sets_peak;
    /* checkpoints: the whole optimizer, only when a run checkpoints or resumes */
    rs_optim *full;
    rs_mem full_mem;
} pipe;

static void comm(pipe *p, const char *op, int index, size_t bytes, double t0)
{
    if (p->ctx.comm) p->ctx.comm(p->ctx.comm_ud, p->step, op, index, bytes, t0, rs_train_now());
}

/* ---------------------------------------------------------------- options and checks */

static const char *const schedules[] = {"naive", "gpipe", "1f1b", "interleaved", NULL}; /* rs_pipe_kind */
static const char *const balances[] = {"params", "time", NULL};

static const rs_strategy_opt pipeline_opts[] = {
    {"schedule", RS_SOPT_ENUM, "1f1b",
     "pipeline: naive (no micro-batches), gpipe (all forwards, then backwards), 1f1b, interleaved", schedules, 0, -1},
    {"micro", RS_SOPT_INT, "4", "pipeline: micro-batches per global batch (schedule=naive: 1)", NULL, 1, 4096},
    {"virtual", RS_SOPT_INT, NULL, "pipeline schedule=interleaved: stages per rank (default 2)", NULL, 1, 64},
    {"split", RS_SOPT_STRING, NULL, "pipeline: layers where stages begin, e.g. split=4,8 (default: balance=)", NULL, 0,
     -1},
    {"balance", RS_SOPT_ENUM, "params", "pipeline: cut between top-level items evening out parameters or measured time",
     balances, 0, -1},
    {"tie", RS_SOPT_STRING, "auto",
     "pipeline: parameters shared across stages whose gradients are summed (auto: every one, e.g. 0.wte)", NULL, 0,
     -1},
    {NULL, 0, NULL, NULL, NULL, 0, 0},
};

static int virtual_of(const rs_strategy_args *a, rs_pipe_kind k)
{
    if (rs_strategy_given(a, "virtual")) return (int)rs_strategy_int(a, "virtual");
    return k == RS_PIPE_INTERLEAVED ? 2 : 1;
}

/* The stage cuts of this run: split= by hand, or balanced (by time: measured on rank 0, so m must be
 * mutable then; the check at the prompt balances by parameters to see that the cut exists). */
static rs_status cuts_for(const rs_strategy_args *a, const rs_model *m, int S, int *cuts, rs_err *err)
{
    const char *split = rs_strategy_str(a, "split");
    if (split) return rs_pipe_split_parse(m, split, S, cuts, err);
    double cost[512];
    int n = rs_pipe_item_params(m, cost, 512);
    if (n > 512) return rs_err_set(err, RS_ERR_ARG, "pipeline: the model has %d top-level items; at most 512", n);
    return rs_pipe_split_balance(m, cost, S, cuts, err);
}

/* Every tied slot the cuts put on another rank than its owner; names from tie= must be among them
 * (tie=auto takes them all) and every one of them must be named. */
typedef void (*tie_fn)(void *ud, size_t off, size_t numel, int owner_rank, int reader_rank);

static rs_status find_ties(const rs_strategy_args *a, const rs_model *m, const int *cuts, int P, int S, tie_fn fn,
                           void *ud, rs_err *err)
{
    const char *want = rs_strategy_str(a, "tie");
    bool all = !want || !strcmp(want, "auto");
    int n = rs_model_layer_count(m), found = 0;
    char names[512] = "";
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const rs_layer *l = rs_model_layer((rs_model *)m, i);
        for (int j = 0; j < l->np; j++) {
            if (!l->p[j].tied) continue;
            const rs_param_info *owner = NULL;
            for (int t = 0; t < rs_model_tensor_count(m); t++)
                if (rs_model_tensor(m, t)->offset == l->p[j].offset) owner = rs_model_tensor(m, t);
            if (!owner) continue;
            int rs = 0, os = 0;
            for (int s = 0; s < S; s++) {
                if (i >= cuts[s] && i < cuts[s + 1]) rs = s;
                if (owner->layer >= cuts[s] && owner->layer < cuts[s + 1]) os = s;
            }
            if (rs % P == os % P) continue; /* one rank holds both: the gradients add in its buffer */
            bool named = all;
            if (!all) {
                size_t len = strlen(owner->name);
                for (const char *p = want; (p = strstr(p, owner->name)) != NULL; p += len)
                    if ((p == want || p[-1] == ',') && (p[len] == ',' || !p[len])) named = true;
            }
            if (!named)
                return rs_err_set(err, RS_ERR_ARG,
                                  "pipeline: %s is owned by stage %d (layer %d) and read by stage %d (layer %d, %s) on "
                                  "another rank; its gradients must be summed there: add it to tie= or use tie=auto",
                                  owner->name, os, owner->layer, rs, i, l->name);
            found++;
            if (k + 40 < sizeof names) k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? "," : "", owner->name);
            if (fn) fn(ud, owner->offset, owner->numel, os % P, rs % P);
        }
    }
    /* a name in tie= that is no shared parameter across ranks is a mistake worth saying */
    if (!all) {
        char copy[RS_STRATEGY_VAL_MAX];
        snprintf(copy, sizeof copy, "%s", want);
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bool ok = false;
            size_t len = strlen(t);
            for (const char *p = names; (p = strstr(p, t)) != NULL; p += len)
                if ((p == names || p[-1] == ',') && (p[len] == ',' || !p[len])) ok = true;
            if (!ok)
                return rs_err_set(err, RS_ERR_ARG,
                                  "pipeline: tie=%s: %s is not a parameter two stages on different ranks share%s%s "
                                  "(tie=auto finds them)",
                                  want, t, found ? "; those are: " : "; with these stages there are none", names);
        }
    }
    return RS_OK;
}

static rs_status pipeline_check(const rs_strategy_args *a, const rs_model *m, int world, const rs_train_cfg *cfg,
                                rs_err *err)
{
    rs_pipe_kind k = (rs_pipe_kind)rs_strategy_choice(a, "schedule");
    int M = (int)rs_strategy_int(a, "micro"), V = virtual_of(a, k);
    if (k == RS_PIPE_NAIVE && !rs_strategy_given(a, "micro")) M = 1;
    if (world < 2) return rs_err_set(err, RS_ERR_ARG, "mode=pipeline needs ranks=2 or more (one stage each)");
    if (V > 1 && k != RS_PIPE_INTERLEAVED)
        return rs_err_set(err, RS_ERR_ARG, "virtual=%d: several stages per rank are schedule=interleaved", V);
    rs_status st = rs_pipe_check(k, world, M, V, err);
    if (st) return rs_err_prefix(err, "mode=pipeline");
    if (cfg) {
        if (cfg->accum > 1)
            return rs_err_set(err, RS_ERR_ARG,
                              "mode=pipeline: accum=%d: micro=%d already splits each batch into micro-batches whose "
                              "gradients add up; raise micro= (and batch=) instead",
                              cfg->accum, M);
        if (cfg->batch < M)
            return rs_err_set(err, RS_ERR_ARG, "mode=pipeline: batch=%d cannot make micro=%d micro-batches of a sample "
                                               "or more (try batch=%d)", cfg->batch, M, M);
    }
    if (!m) return RS_OK;
    int S = world * V, *cuts = malloc(sizeof *cuts * (size_t)(S + 1));
    if (!cuts) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    st = cuts_for(a, m, S, cuts, err);
    if (!st) st = find_ties(a, m, cuts, world, S, NULL, NULL, err);
    free(cuts);
    return st;
}

/* ---------------------------------------------------------------- the executor's callbacks */

static size_t io_numel(void *ud, int micro, int stage)
{
    pipe *p = ud;
    const rs_layer *l = rs_model_layer(p->m, p->cuts[stage] - 1);
    return (size_t)p->rows[micro] * (size_t)rs_shape_numel(&l->out);
}

/* An activation set of chunk c for a micro-batch: a free one, or a new one (counted in ACTS). */
static rs_acts *take_set(pipe *p, chunk *c, rs_err *err)
{
    for (int i = 0; i < c->nsets; i++)
        if (!c->busy[i]) {
            c->busy[i] = true;
            p->acts_now += c->bytes[i];
            return c->sets[i];
        }
    rs_acts **s = realloc(c->sets, sizeof *s * (size_t)(c->nsets + 1));
    if (s) c->sets = s;
    bool *b = realloc(c->busy, sizeof *b * (size_t)(c->nsets + 1));
    if (b) c->busy = b;
    size_t *by = realloc(c->bytes, sizeof *by * (size_t)(c->nsets + 1));
    if (by) c->bytes = by;
    if (!s || !b || !by) {
        rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
        return NULL;
    }
    int64_t before = rs_model_mem(p->m)->live[RS_POOL_ACTS];
    rs_acts *a = rs_acts_new_range(p->m, c->first, c->last, p->batch_cap, err);
    if (!a) return NULL;
    c->sets[c->nsets] = a;
    c->bytes[c->nsets] = (size_t)(rs_model_mem(p->m)->live[RS_POOL_ACTS] - before);
    if (c->bytes[c->nsets] > p->set_bytes) p->set_bytes = c->bytes[c->nsets];
    p->acts_now += c->bytes[c->nsets];
    c->busy[c->nsets++] = true;
    return a;
}

static void give_set(pipe *p, chunk *c, rs_acts *a)
{
    for (int i = 0; i < c->nsets; i++)
        if (c->sets[i] == a && c->busy[i]) {
            c->busy[i] = false;
            p->acts_now -= c->bytes[i];
        }
}

static const void *micro_input(pipe *p, int micro)
{
    size_t per = (size_t)rs_shape_numel(rs_model_input_shape(p->m));
    return (const char *)p->x + (size_t)p->row0[micro] * per * 4; /* 4-byte elements: floats or token ids */
}

static rs_status io_forward(void *ud, int micro, int ci, const float *in, const float **out, rs_err *err)
{
    pipe *p = ud;
    chunk *c = &p->ch[ci];
    rs_acts *a = take_set(p, c, err);
    if (!a) return err ? err->code : RS_ERR_NOMEM;
    p->held[micro * p->V + ci] = a;
    if (++p->sets_held > p->sets_peak) p->sets_peak = p->sets_held;
    /* the dropout masks of the first stage's draw, so every stage masks as one process would */
    if (c->stage > 0) rs_acts_set_step(a, p->step_base + (uint64_t)micro + 1);
    const void *x = c->stage == 0 ? micro_input(p, micro) : in;
    rs_status st = rs_model_forward_range(p->m, a, c->first, c->last, x, p->rows[micro], out, err);
    if (!st && c->stage == p->S - 1) {
        int R = rs_model_rows(p->m), C = rs_model_classes(p->m);
        float l = 0;
        st = rs_model_loss_acts(p->m, a, p->y + (size_t)p->row0[micro] * (size_t)R, p->rows[micro], &l, err);
        p->loss += (double)l * p->rows[micro] / p->B;
        if (!st)
            memcpy(p->logits + (size_t)p->row0[micro] * (size_t)R * (size_t)C, *out,
                   (size_t)p->rows[micro] * (size_t)R * (size_t)C * sizeof(float));
    }
    size_t now = p->acts_now + rs_pipe_exec_inputs(p->ex);
    if (now > p->acts_peak) p->acts_peak = now;
    return st;
}

static rs_status io_backward(void *ud, int micro, int ci, const float *in, const float *dout, float *din, rs_err *err)
{
    pipe *p = ud;
    chunk *c = &p->ch[ci];
    rs_acts *a = p->held[micro * p->V + ci];
    (void)err;
    /* the loss of each micro-batch is its mean: scaled by its share of the batch, the sum is the batch's */
    if (c->stage == p->S - 1) rs_acts_set_loss_scale(a, p->loss_scale * (float)p->rows[micro] / (float)p->B);
    rs_model_backward_range(p->m, a, c->first, c->last, c->stage == 0 ? micro_input(p, micro) : in, dout, din,
                            p->rows[micro]);
    give_set(p, c, a);
    p->held[micro * p->V + ci] = NULL;
    p->sets_held--;
    return RS_OK;
}

/* ---------------------------------------------------------------- the strategy */

static void on_tie(void *ud, size_t off, size_t numel, int owner, int reader)
{
    pipe *p = ud;
    if (p->rank != owner && p->rank != reader) return;
    tie *t = realloc(p->ties, sizeof *t * (size_t)(p->nties + 1));
    if (!t) return;
    p->ties = t;
    p->ties[p->nties++] = (tie){off, numel, p->rank == owner ? reader : owner, p->rank == reader, NULL};
    if (numel > p->tie_max) p->tie_max = numel;
}

/* The parameters a stage owns: its layers' tensors (tied slots belong to their owner). */
static void stage_range(rs_model *m, int first, int last, size_t *off, size_t *len)
{
    size_t lo = (size_t)-1, hi = 0;
    for (int t = 0; t < rs_model_tensor_count(m); t++) {
        const rs_param_info *pi = rs_model_tensor(m, t);
        if (pi->layer < first || pi->layer >= last) continue;
        if (pi->offset < lo) lo = pi->offset;
        if (pi->offset + pi->numel > hi) hi = pi->offset + pi->numel;
    }
    *off = hi ? lo : 0;
    *len = hi ? hi - lo : 0;
}

static rs_status p_setup(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err)
{
    pipe *p = ud;
    if (m != p->m) return rs_err_set(err, RS_ERR_ARG, "pipeline: set up for model %s, trained with %s",
                                     rs_model_name(p->m), rs_model_name(m));
    p->optcfg = *opt;
    /* Every stage starts from rank 0's parameters and step (the REPL's weights). */
    double t0 = rs_train_now();
    rs_status st = rs_pg_broadcast(p->g, rs_model_params(m), rs_model_numel(m), RS_F32, 0, err);
    comm(p, rs_pg_op_name(RS_OP_BROADCAST), -1, rs_model_numel(m) * sizeof(float), t0);
    int64_t mstep = (int64_t)rs_model_step(m);
    if (!st) st = rs_pg_broadcast(p->g, &mstep, 1, RS_I64, 0, err);
    if (st) return st;
    rs_model_set_step(m, (uint64_t)mstep);

    /* the cuts: by hand, by parameters, or by time measured on rank 0 (every rank takes rank 0's) */
    const rs_strategy_args *a = p->ctx.args;
    if (!rs_strategy_str(a, "split") && rs_strategy_choice(a, "balance") == 1) {
        double cost[512];
        int n = 0;
        if (p->rank == 0) st = rs_pipe_item_times(m, p->batch_cap, cost, 512, &n, err);
        if (!st && p->rank == 0) st = rs_pipe_split_balance(m, cost, p->S, p->cuts, err);
        int32_t cuts[1024];
        for (int s = 0; s <= p->S && s < 1024; s++) cuts[s] = p->rank == 0 && !st ? p->cuts[s] : 0;
        /* a failure on rank 0 shows on the others as cuts that cannot be */
        rs_err e2 = {0};
        rs_status bst = rs_pg_broadcast(p->g, cuts, (size_t)p->S + 1, RS_I32, 0, st ? &e2 : err);
        if (st) return st;
        if (bst) return bst;
        for (int s = 0; s <= p->S; s++) p->cuts[s] = cuts[s];
        if (p->cuts[p->S] != rs_model_layer_count(m))
            return rs_err_set(err, RS_ERR_ARG, "pipeline: rank 0 could not balance the stages by time");
    } else {
        st = cuts_for(a, m, p->S, p->cuts, err);
        if (st) return st;
    }
    st = find_ties(a, m, p->cuts, p->P, p->S, on_tie, p, err);
    if (st) return st;

    for (int c = 0; c < p->V; c++) {
        chunk *ch = &p->ch[c];
        ch->stage = c * p->P + p->rank;
        ch->first = p->cuts[ch->stage];
        ch->last = p->cuts[ch->stage + 1];
        stage_range(m, ch->first, ch->last, &ch->off, &ch->len);
        if (p->ctx.stage) p->ctx.stage(p->ctx.ud, ch->stage, p->S, ch->first, ch->last - 1);
        if (!ch->len) continue;
        ch->opt = rs_optim_new(opt, rs_model_device(m), ch->len, p->mem, err);
        if (!ch->opt) return err ? err->code : RS_ERR_NOMEM;
        st = rs_train_apply_groups(ch->opt, m, ch->off, err);
        if (st) return st;
    }
    for (int i = 0; i < p->nties; i++) {
        tie *t = &p->ties[i];
        if (!t->reader) continue;
        t->opt = rs_optim_new(opt, rs_model_device(m), t->numel, p->mem, err);
        if (!t->opt) return err ? err->code : RS_ERR_NOMEM;
        st = rs_train_apply_groups(t->opt, m, t->off, err);
        if (st) return st;
    }
    if (p->tie_max) {
        p->tie_buf = rs_mem_alloc(p->mem, RS_POOL_COMM, p->tie_max * sizeof(float));
        if (!p->tie_buf) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for a tied gradient");
    }
    /* In a pipeline some stage is always waiting for its neighbour; a waiter that spins takes the core
     * a working stage needs whenever ranks share cores (more ranks than cores, a busy machine), which
     * would show as bubble that is not the schedule's. */
    p->g->polite = true;
    p->ex = rs_pipe_exec_new(p->g, p->mem, err);
    return p->ex ? RS_OK : (err ? err->code : RS_ERR_NOMEM);
}

static rs_status p_forward_backward(void *ud, const float *x, const int32_t *y, int B, float loss_scale, float *loss,
                                    const float **logits, rs_err *err)
{
    pipe *p = ud;
    int M = p->M < B ? p->M : B;
    if (p->kind == RS_PIPE_INTERLEAVED) M -= M % p->P;
    if (M < 1)
        return rs_err_set(err, RS_ERR_ARG, "pipeline: a batch of %d samples cannot go round %d ranks in micro-batches", B,
                          p->P);
    int R = rs_model_rows(p->m), C = rs_model_classes(p->m);
    size_t need = (size_t)B * (size_t)R * (size_t)C;
    if (need > p->logits_n) {
        rs_mem_free(p->mem, RS_POOL_SCRATCH, p->logits, p->logits_n * sizeof(float));
        p->logits = rs_mem_alloc(p->mem, RS_POOL_SCRATCH, need * sizeof(float));
        p->logits_n = p->logits ? need : 0;
        if (!p->logits) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory for %zu scores", need);
    }
    p->x = x, p->y = y, p->B = B, p->Meff = M, p->loss_scale = loss_scale, p->loss = 0;
    for (int m = 0, at = 0; m < M; m++) {
        p->rows[m] = B / M + (m < B % M);
        p->row0[m] = at;
        at += p->rows[m];
    }
    p->step_base = rs_model_step(p->m);
    p->acts_peak = 0;
    p->sets_peak = p->sets_held = 0;
    rs_pipe_io io = {.forward = io_forward, .backward = io_backward, .numel = io_numel, .ud = p};
    rs_status st = rs_pipe_exec_step(p->ex, p->kind, M, p->V, &io, p->step, p->ctx.work, p->ctx.work_ud, err);
    if (st) return st;
    /* every stage drew the same dropout steps; the first stage's model counted them */
    rs_model_set_step(p->m, p->step_base + (uint64_t)M);
    /* the loss is the last stage's: every rank reports it */
    float l = (float)p->loss;
    double t0 = rs_train_now();
    st = rs_pg_broadcast(p->g, &l, 1, RS_F32, (p->S - 1) % p->P, err);
    comm(p, rs_pg_op_name(RS_OP_BROADCAST), -1, sizeof l, t0);
    if (st) return st;
    *loss = l;
    *logits = p->logits; /* the last stage's scores; zeros elsewhere (accuracy is the last stage's) */
    if (p->ctx.metric) {
        p->ctx.metric(p->ctx.ud, p->step, "acts_peak_bytes", (double)p->acts_peak);
        p->ctx.metric(p->ctx.ud, p->step, "acts_inflight", p->sets_peak);
        p->ctx.metric(p->ctx.ud, p->step, "act_set_bytes", (double)p->set_bytes);
    }
    return RS_OK;
}

/* The two contributions of each parameter shared across ranks, summed on both (a + b == b + a, so
 * both hold the same bits). */
static rs_status p_after_backward(void *ud, rs_err *err)
{
    pipe *p = ud;
    float *g = rs_model_grads(p->m);
    for (int i = 0; i < p->nties; i++) {
        tie *t = &p->ties[i];
        double t0 = rs_train_now();
        rs_work *rw = NULL, *sw = NULL;
        rs_status st = rs_pg_irecv(p->g, p->tie_buf, t->numel, RS_F32, t->peer, &rw, err);
        if (!st) st = rs_pg_isend(p->g, g + t->off, t->numel, RS_F32, t->peer, &sw, err);
        if (!st) st = rs_work_wait(rw, err);
        if (!st) st = rs_work_wait(sw, err);
        rs_work_free(rw);
        rs_work_free(sw);
        if (st) return rs_err_prefix(err, "pipeline: summing a tied gradient with rank %d", t->peer);
        for (size_t k = 0; k < t->numel; k++) g[t->off + k] += p->tie_buf[k];
        comm(p, "tie_sum", i, 2 * t->numel * sizeof(float), t0);
    }
    return RS_OK;
}

static rs_status p_grad_sumsq(void *ud, double *sumsq, rs_err *err)
{
    pipe *p = ud;
    const float *g = rs_model_grads(p->m);
    double s = 0;
    for (int c = 0; c < p->V; c++)
        for (size_t i = 0; i < p->ch[c].len; i++) s += (double)g[p->ch[c].off + i] * g[p->ch[c].off + i];
    double t0 = rs_train_now();
    rs_status st = rs_pg_all_reduce(p->g, &s, 1, RS_F64, RS_SUM, err);
    comm(p, rs_pg_op_name(RS_OP_ALL_REDUCE), -1, sizeof s, t0);
    *sumsq = s;
    return st;
}

static void p_grad_scale(void *ud, float s)
{
    pipe *p = ud;
    float *g = rs_model_grads(p->m);
    for (int c = 0; c < p->V; c++)
        for (size_t i = 0; i < p->ch[c].len; i++) g[p->ch[c].off + i] *= s;
    for (int i = 0; i < p->nties; i++)
        if (p->ties[i].reader)
            for (size_t k = 0; k < p->ties[i].numel; k++) g[p->ties[i].off + k] *= s;
}

static rs_status p_step(void *ud, float lr, rs_err *err)
{
    pipe *p = ud;
    float *w = rs_model_params(p->m), *g = rs_model_grads(p->m);
    rs_status st = RS_OK;
    for (int c = 0; c < p->V && !st; c++)
        if (p->ch[c].opt) st = rs_optim_step(p->ch[c].opt, w + p->ch[c].off, g + p->ch[c].off, lr);
    for (int i = 0; i < p->nties && !st; i++)
        if (p->ties[i].opt) st = rs_optim_step(p->ties[i].opt, w + p->ties[i].off, g + p->ties[i].off, lr);
    if (st) return rs_err_set(err, st, "pipeline: optimizer step failed (lr=%g)", (double)lr);
    p->step++;
    return RS_OK;
}

/* Rank 0 receives every other stage's range (in stage order on every rank, so sends meet receives). */
static rs_status p_gather(void *ud, rs_err *err)
{
    pipe *p = ud;
    float *w = rs_model_params(p->m);
    double t0 = rs_train_now();
    size_t moved = 0;
    for (int s = 0; s < p->S; s++) {
        int owner = s % p->P;
        size_t off, len;
        stage_range(p->m, p->cuts[s], p->cuts[s + 1], &off, &len);
        if (owner == 0 || !len) continue;
        rs_status st = RS_OK;
        if (p->rank == 0) st = rs_pg_recv(p->g, w + off, len, RS_F32, owner, err);
        else if (p->rank == owner) st = rs_pg_send(p->g, w + off, len, RS_F32, 0, err);
        if (st) return rs_err_prefix(err, "pipeline: gathering stage %d's parameters to rank 0", s);
        moved += len * sizeof(float);
    }
    comm(p, "gather_stages", -1, moved, t0);
    return RS_OK;
}

static rs_optim *p_optimizer(void *ud)
{
    pipe *p = ud;
    if (!p->full) {
        rs_err e = {0};
        p->full = rs_optim_new(&p->optcfg, rs_model_device(p->m), rs_model_numel(p->m), &p->full_mem, &e);
        if (p->full) rs_mem_count(p->mem, RS_POOL_SCRATCH, (int64_t)rs_optim_state_bytes(p->full));
        if (p->full) rs_train_apply_groups(p->full, p->m, 0, &e);
    }
    return p->full;
}

/* Checkpoints hold the whole optimizer: to_full brings each stage's state to rank 0's full one;
 * !to_full (after a resume loaded the full one on every rank) takes this rank's ranges back out,
 * whatever layout wrote it. */
static rs_status p_sync_optimizer(void *ud, bool to_full, rs_err *err)
{
    pipe *p = ud;
    if (!p->full) return RS_OK;
    int ns = rs_optim_state_count(p->full);
    for (int s = 0; s < p->S; s++) {
        int owner = s % p->P;
        if (!to_full && owner != p->rank) continue;
        chunk *ch = NULL;
        for (int c = 0; c < p->V; c++)
            if (p->ch[c].stage == s) ch = &p->ch[c];
        size_t off, len;
        stage_range(p->m, p->cuts[s], p->cuts[s + 1], &off, &len);
        if (!len) continue;
        for (int k = 0; k < ns; k++) {
            float *full = rs_optim_state(p->full, k) + off;
            rs_status st = RS_OK;
            if (!to_full) memcpy(rs_optim_state(ch->opt, k), full, len * sizeof(float));
            else if (owner == 0 && p->rank == 0) memcpy(full, rs_optim_state(ch->opt, k), len * sizeof(float));
            else if (p->rank == 0) st = rs_pg_recv(p->g, full, len, RS_F32, owner, err);
            else if (p->rank == owner) st = rs_pg_send(p->g, rs_optim_state(ch->opt, k), len, RS_F32, 0, err);
            if (st) return rs_err_prefix(err, "pipeline: gathering stage %d's optimizer state", s);
        }
    }
    /* the step count (Adam's bias correction) is the same on every stage */
    int64_t steps = 0;
    for (int c = 0; c < p->V; c++)
        if (p->ch[c].opt) steps = rs_optim_step_count(p->ch[c].opt);
    if (to_full) rs_optim_set_step_count(p->full, steps);
    for (int i = 0; i < p->nties && !to_full; i++)
        if (p->ties[i].opt) {
            for (int k = 0; k < ns; k++)
                memcpy(rs_optim_state(p->ties[i].opt, k), rs_optim_state(p->full, k) + p->ties[i].off,
                       p->ties[i].numel * sizeof(float));
            rs_optim_set_step_count(p->ties[i].opt, rs_optim_step_count(p->full));
        }
    for (int c = 0; c < p->V && !to_full; c++)
        if (p->ch[c].opt) rs_optim_set_step_count(p->ch[c].opt, rs_optim_step_count(p->full));
    return RS_OK;
}

static void p_teardown(void *ud)
{
    pipe *p = ud;
    if (!p) return;
    for (int c = 0; p->ch && c < p->V; c++) {
        rs_optim_free(p->ch[c].opt);
        for (int i = 0; i < p->ch[c].nsets; i++) rs_acts_free(p->ch[c].sets[i]);
        free(p->ch[c].sets);
        free(p->ch[c].busy);
        free(p->ch[c].bytes);
    }
    for (int i = 0; i < p->nties; i++) rs_optim_free(p->ties[i].opt);
    if (p->full) {
        rs_mem_count(p->mem, RS_POOL_SCRATCH, -(int64_t)rs_optim_state_bytes(p->full));
        rs_optim_free(p->full);
    }
    rs_mem_free(p->mem, RS_POOL_COMM, p->tie_buf, p->tie_max * sizeof(float));
    rs_mem_free(p->mem, RS_POOL_SCRATCH, p->logits, p->logits_n * sizeof(float));
    rs_pipe_exec_free(p->ex);
    if (p->ex) p->g->polite = false;
    free(p->ties);
    free(p->ch);
    free(p->cuts);
    free(p->rows);
    free(p->row0);
    free(p->held);
    free(p);
}

static rs_status pipeline_make(const rs_strategy_ctx *x, rs_train_strategy *out, rs_err *err)
{
    rs_pipe_kind k = (rs_pipe_kind)rs_strategy_choice(x->args, "schedule");
    int M = (int)rs_strategy_int(x->args, "micro"), V = virtual_of(x->args, k);
    if (k == RS_PIPE_NAIVE && !rs_strategy_given(x->args, "micro")) M = 1;
    rs_status st = pipeline_check(x->args, NULL, x->g->world, x->cfg, err);
    if (st) return st;
    pipe *p = calloc(1, sizeof *p);
    if (!p) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    p->g = x->g;
    p->m = x->m;
    p->mem = rs_model_mem(x->m);
    p->ctx = *x;
    p->kind = k;
    p->P = x->g->world;
    p->rank = x->g->rank;
    p->V = V;
    p->S = p->P * V;
    p->M = M;
    int batch = x->cfg ? x->cfg->batch : M;
    p->batch_cap = (batch + M - 1) / M;
    p->cuts = calloc((size_t)p->S + 1, sizeof *p->cuts);
    p->ch = calloc((size_t)V, sizeof *p->ch);
    p->rows = calloc((size_t)M, sizeof *p->rows);
    p->row0 = calloc((size_t)M, sizeof *p->row0);
    p->held = calloc((size_t)M * (size_t)V, sizeof *p->held);
    if (!p->cuts || !p->ch || !p->rows || !p->row0 || !p->held) {
        p_teardown(p);
        return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    }
    /* the sampler's split is none: every stage reads the whole batch */
    *out = (rs_train_strategy){.name = "pipeline", .ud = p, .rank = 0, .world = 1, .report = p->rank == 0,
                               .setup = p_setup, .forward_backward = p_forward_backward, .own_acts = true,
                               .own_phases = true,
                               .after_backward = p_after_backward, .step = p_step, .gather = p_gather,
                               .optimizer = p_optimizer, .sync_optimizer = p_sync_optimizer, .teardown = p_teardown,
                               .grad_sumsq = p_grad_sumsq, .grad_scale = p_grad_scale};
    return RS_OK;
}

const rs_strategy_def rs_strategy_pipeline = {
    .name = "pipeline", .kind = "rank processes",
    .about = "pipeline parallelism: stages of layers on the ranks, micro-batches flowing through them",
    .uses = RS_SUSE_RANKS | RS_SUSE_PROCS | RS_SUSE_WHOLE_BATCH, .opts = pipeline_opts, .check = pipeline_check,
    .make = pipeline_make,
};
