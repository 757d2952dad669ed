/* Folding rank lines into the dashboard's model (model.h). Every ring is allocated once, in
 * rs_view_model_new, so a stream of any length costs the same bounded memory, and junk from a rank
 * (a line cut in half, a rank number out of range) is counted and dropped, never trusted. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *rs_view_state_word(rs_view_state s)
{
    static const char *const w[RS_VIEW_ST_COUNT] = {"starting", "data", "forward", "backward",
                                                    "comm", "optimizer", "idle", "done"};
    return (unsigned)s < RS_VIEW_ST_COUNT ? w[s] : "?";
}

char rs_view_state_letter(rs_view_state s)
{
    static const char l[RS_VIEW_ST_COUNT] = {'?', 'D', 'F', 'B', 'C', 'O', '.', '='};
    return (unsigned)s < RS_VIEW_ST_COUNT ? l[s] : '?';
}

/* The phase names rs_phase_name writes; anything else is not a phase we can draw. */
static bool state_from_phase(const char *name, rs_view_state *out)
{
    static const struct { const char *n; rs_view_state s; } t[] = {
        {"data", RS_VIEW_ST_DATA},   {"forward", RS_VIEW_ST_FORWARD},  {"backward", RS_VIEW_ST_BACKWARD},
        {"comm", RS_VIEW_ST_COMM},   {"optimizer", RS_VIEW_ST_OPTIM}, {"idle", RS_VIEW_ST_IDLE},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(name, t[i].n)) {
            *out = t[i].s;
            return true;
        }
    return false;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void clear_rank(rs_view_rank *r)
{
    memset(r, 0, sizeof *r);
    r->coll_peer = -1;
    r->coll_chunk = -1;
    r->coll_t0 = -1;
    r->coll_released = -1;
    r->comm_index = -1;
}

void rs_view_model_reset(rs_view_model *vm)
{
    vm->run_id[0] = vm->kind[0] = vm->mode[0] = vm->backend[0] = 0;
    vm->world = 0;
    vm->steps_total = 0;
    vm->epochs = 0;
    vm->t_start = -1;
    vm->t_last = 0;
    vm->nranks = 0;
    for (int i = 0; i < RS_VIEW_MAX_RANKS; i++) clear_rank(&vm->ranks[i]);
    memset(&vm->coll, 0, sizeof vm->coll);
    memset(&vm->last_coll, 0, sizeof vm->last_coll);
    vm->log_head = vm->n_log = 0;
    vm->fed = vm->ignored = vm->dropped = 0;
    vm->eval_acc = vm->eval_loss = 0;
    vm->eval_epoch = -1;
    vm->pipe_stages = 0;
    vm->bench_head = vm->n_bench = vm->bench_rows = 0;
    vm->bench_clock = 0;
}

rs_view_model *rs_view_model_new(rs_err *err)
{
    rs_view_model *vm = calloc(1, sizeof *vm);                          /* owned by the caller */
    if (vm) vm->ranks = calloc(RS_VIEW_MAX_RANKS, sizeof *vm->ranks);   /* owned by vm */
    if (vm && vm->ranks) vm->log = calloc(RS_VIEW_LOG_N, sizeof *vm->log); /* owned by vm */
    if (!vm || !vm->ranks || !vm->log) {
        rs_view_model_free(vm);
        rs_err_set(err, RS_ERR_NOMEM, "dashboard: out of memory for the view model");
        return NULL;
    }
    rs_view_model_reset(vm);
    return vm;
}

void rs_view_model_free(rs_view_model *vm)
{
    if (!vm) return;
    free(vm->ranks);
    free(vm->log);
    free(vm);
}

void rs_view_set_run(rs_view_model *vm, const rs_view_run *run)
{
    copy_str(vm->run_id, sizeof vm->run_id, run->id);
    copy_str(vm->kind, sizeof vm->kind, run->kind);
    copy_str(vm->mode, sizeof vm->mode, run->mode);
    copy_str(vm->backend, sizeof vm->backend, run->backend);
    vm->world = run->world < 0 ? 0 : run->world > RS_VIEW_MAX_RANKS ? RS_VIEW_MAX_RANKS : run->world;
    if (vm->nranks < vm->world) vm->nranks = vm->world;
    vm->steps_total = run->steps_total > 0 ? run->steps_total : 0;
    vm->epochs = run->epochs > 0 ? run->epochs : 0;
    vm->t_start = run->t_start >= 0 ? run->t_start : -1;
}

/* The rank's slot, or NULL (counted) for ranks out of range. */
static rs_view_rank *rank_slot(rs_view_model *vm, int rank)
{
    if (rank < 0 || rank >= RS_VIEW_MAX_RANKS) {
        vm->dropped++;
        return NULL;
    }
    if (rank >= vm->nranks) vm->nranks = rank + 1;
    rs_view_rank *r = &vm->ranks[rank];
    r->seen = true;
    return r;
}

static void saw_time(rs_view_model *vm, double t)
{
    if (!isfinite(t)) return;
    if (vm->t_start < 0) vm->t_start = t;
    if (t > vm->t_last) vm->t_last = t;
}

static void set_state(rs_view_rank *r, rs_view_state s, double t)
{
    if (r->state == RS_VIEW_ST_DONE) return; /* a late line does not wake a finished rank */
    if (t < r->state_t) return;              /* lines of one rank arrive in order, but spans end out of order */
    r->state = s;
    r->state_t = t;
}

static void push_span(rs_view_rank *r, double t0, double t1, int64_t step, rs_view_state s, bool comm)
{
    if (!(t1 >= t0)) return; /* also refuses NaN */
    rs_view_span *sp = &r->spans[r->span_head];
    sp->t0 = t0;
    sp->t1 = t1;
    sp->step = step;
    sp->state = (uint8_t)s;
    sp->comm = comm;
    sp->micro = sp->stage = -1;
    r->span_head = (r->span_head + 1) % RS_VIEW_SPAN_N;
    if (r->n_span < RS_VIEW_SPAN_N) r->n_span++;
}

const rs_view_span *rs_view_span_at(const rs_view_rank *r, int i)
{
    if (i < 0 || i >= r->n_span) return NULL;
    return &r->spans[(r->span_head - 1 - i + 2 * RS_VIEW_SPAN_N) % RS_VIEW_SPAN_N];
}

bool rs_view_rank_loss(const rs_view_rank *r, int i, float *out)
{
    if (i < 0 || i >= r->n_loss) return false;
    *out = r->losses[(r->loss_head - 1 - i + 2 * RS_VIEW_LOSS_N) % RS_VIEW_LOSS_N];
    return true;
}

const rs_view_log_line *rs_view_log_at(const rs_view_model *vm, int i)
{
    if (i < 0 || i >= vm->n_log) return NULL;
    return &vm->log[(vm->log_head - 1 - i + 2 * RS_VIEW_LOG_N) % RS_VIEW_LOG_N];
}

int64_t rs_view_min_step(const rs_view_model *vm)
{
    int64_t m = -1;
    for (int i = 0; i < vm->nranks; i++)
        if (vm->ranks[i].seen && (m < 0 || vm->ranks[i].step < m)) m = vm->ranks[i].step;
    return m < 0 ? 0 : m;
}

void rs_view_coll_progress(const rs_view_model *vm, int *kmin, int *kmax)
{
    int lo = -1, hi = 0, world = vm->world > 0 ? vm->world : vm->nranks;
    for (int i = 0; i < world && i < RS_VIEW_MAX_RANKS; i++) {
        int k = vm->ranks[i].coll_step;
        if (lo < 0 || k < lo) lo = k;
        if (k > hi) hi = k;
    }
    *kmin = lo < 0 ? 0 : lo;
    *kmax = hi;
}

const char *rs_view_local_step_word(rs_pg_opkind op)
{
    return op == RS_OP_REDUCE || op == RS_OP_ALL_REDUCE || op == RS_OP_REDUCE_SCATTER ? "reduces" : "receives";
}

bool rs_view_training(const rs_view_model *vm)
{
    if (!strcmp(vm->kind, "train")) return true;
    for (int i = 0; i < vm->nranks; i++)
        if (vm->ranks[i].n_loss) return true;
    return false;
}

/* A newer collective replaces the running one; the finished one is kept for its figures. */
static void coll_start(rs_view_model *vm, const rs_pg_event *ev)
{
    if (vm->coll.any && vm->coll.ended > 0) vm->last_coll = vm->coll;
    memset(&vm->coll, 0, sizeof vm->coll);
    vm->coll.any = true;
    vm->coll.active = true;
    vm->coll.op = ev->op;
    vm->coll.algo = ev->algo;
    vm->coll.coll = ev->coll;
    vm->coll.t_begin = ev->t;
    for (int i = 0; i < vm->nranks; i++) {
        rs_view_rank *r = &vm->ranks[i];
        r->coll_step = r->coll_steps = 0;
        r->coll_peer = r->coll_chunk = -1;
        r->coll_step_bytes = 0;
        r->coll_held = 0;
        r->coll_released = -1;
    }
}

/* step=1: the least time any rank was held, i.e. the time every rank spent waiting for keys. */
static double coll_held(const rs_view_model *vm, int world)
{
    double m = -1;
    for (int i = 0; i < world && i < RS_VIEW_MAX_RANKS; i++)
        if (m < 0 || vm->ranks[i].coll_held < m) m = vm->ranks[i].coll_held;
    return m > 0 ? m : 0;
}

void rs_view_feed_release(rs_view_model *vm, uint64_t coll, int k, double t)
{
    if (!vm->coll.any || coll != vm->coll.coll || !isfinite(t)) return;
    for (int i = 0; i < vm->nranks; i++) {
        rs_view_rank *r = &vm->ranks[i];
        /* held only if it stands at step k (reported it, not released yet): one that reports k later
         * finds the key set and goes straight on */
        if (r->coll_step - 1 != k || r->coll_released >= k || r->coll_t0 < 0) continue;
        if (t > r->coll_step_t) r->coll_held += t - r->coll_step_t;
        r->coll_released = k;
    }
}

void rs_view_feed_event(rs_view_model *vm, const rs_pg_event *ev)
{
    if (ev->group != 0) { /* sub-groups (pipeline stages, tensor-parallel groups) are not drawn yet */
        vm->ignored++;
        return;
    }
    rs_view_rank *r = rank_slot(vm, ev->rank);
    if (!r) return;
    vm->fed++;
    saw_time(vm, ev->t);
    /* Events of an older collective (a slow rank's END) still count for it, but never restart the pane. */
    bool current = vm->coll.any && ev->coll == vm->coll.coll;
    if (!current && (!vm->coll.any || ev->coll > vm->coll.coll)) {
        coll_start(vm, ev);
        current = true;
    }
    rs_view_coll *c = current ? &vm->coll : NULL;
    switch (ev->kind) {
    case RS_PG_EV_BEGIN:
        if (c) {
            c->begun++;
            c->msg_bytes = ev->bytes;
            if (ev->t < c->t_begin) c->t_begin = ev->t;
        }
        r->coll_t0 = ev->t;
        set_state(r, RS_VIEW_ST_COMM, ev->t);
        break;
    case RS_PG_EV_STEP:
        if (!c) break;
        if (ev->peer >= 0) c->moved += ev->bytes; /* a receive or local reduce moves nothing more */
        if (ev->steps > c->steps) c->steps = ev->steps;
        r->coll_step = ev->step + 1; /* events count steps from 0; the pane says "step 1 of K" */
        r->coll_step_t = ev->t;
        r->coll_steps = ev->steps;
        r->coll_peer = ev->peer;
        r->coll_chunk = ev->chunk;
        r->coll_step_bytes = ev->bytes;
        break;
    case RS_PG_EV_END:
        if (r->coll_t0 >= 0) push_span(r, r->coll_t0, ev->t, r->step, RS_VIEW_ST_COMM, true);
        if (c && r->coll_t0 >= 0 && ev->t - r->coll_t0 - r->coll_held > c->slowest)
            c->slowest = ev->t - r->coll_t0 - r->coll_held;
        r->coll_t0 = -1;
        set_state(r, RS_VIEW_ST_IDLE, ev->t);
        if (!c) break;
        c->ended++;
        if (ev->t > c->t_end) c->t_end = ev->t;
        int world = vm->world > 0 ? vm->world : vm->nranks;
        if (c->ended >= world) {
            c->active = false;
            c->held = coll_held(vm, world);
            double dt = c->slowest;
            if (dt > 0) {
                c->algbw = (double)c->msg_bytes / dt / 1e9;
                c->busbw = c->algbw * rs_pg_bus_factor(c->op, world);
            }
        }
        break;
    }
}

void rs_view_feed_train(rs_view_model *vm, const rs_train_line *tl)
{
    rs_view_rank *r = rank_slot(vm, tl->rank);
    if (!r) return;
    vm->fed++;
    rs_view_state s;
    switch (tl->kind) {
    case RS_TL_PHASE:
        if (!state_from_phase(tl->name, &s)) {
            vm->ignored++;
            break;
        }
        saw_time(vm, tl->t1);
        push_span(r, tl->t0, tl->t1, tl->step, s, s == RS_VIEW_ST_COMM);
        set_state(r, s, tl->t1);
        break;
    case RS_TL_COMM:
        saw_time(vm, tl->t1);
        push_span(r, tl->t0, tl->t1, tl->step, RS_VIEW_ST_COMM, true);
        copy_str(r->comm_op, sizeof r->comm_op, tl->name);
        r->comm_index = tl->index;
        r->comm_bytes = tl->bytes;
        r->comm_t0 = tl->t0;
        r->comm_t1 = tl->t1;
        if (tl->index >= 0) {
            if (!r->comm_n || tl->step != r->comm_step) {
                r->comm_step = tl->step;
                r->comm_n = 0;
                r->comm_lo = r->comm_hi = tl->index;
                r->comm_sum_bytes = 0;
                r->comm_sum_s = 0;
                r->comm_set = 0;
            }
            if (tl->index < 64) r->comm_set |= (uint64_t)1 << tl->index;
            r->comm_n++;
            copy_str(r->comm_nop, sizeof r->comm_nop, tl->name);
            if (tl->index < r->comm_lo) r->comm_lo = tl->index;
            if (tl->index > r->comm_hi) r->comm_hi = tl->index;
            r->comm_sum_bytes += tl->bytes;
            r->comm_sum_s += tl->t1 - tl->t0 > 0 ? tl->t1 - tl->t0 : 0;
        }
        break;
    case RS_TL_STEP:
        r->step = tl->step;
        r->epoch = tl->epoch;
        r->loss = tl->loss;
        r->lr = tl->lr;
        r->sps = tl->sps;
        r->losses[r->loss_head] = (float)tl->loss;
        r->loss_head = (r->loss_head + 1) % RS_VIEW_LOSS_N;
        if (r->n_loss < RS_VIEW_LOSS_N) r->n_loss++;
        break;
    case RS_TL_MEM:
        memcpy(r->live, tl->live, sizeof r->live);
        memcpy(r->peak, tl->peak, sizeof r->peak);
        r->has_mem = true;
        break;
    case RS_TL_EVAL:
        vm->eval_epoch = tl->epoch;
        vm->eval_acc = tl->acc;
        vm->eval_loss = tl->loss;
        break;
    case RS_TL_DONE:
        r->step = tl->step;
        r->done_s = tl->seconds;
        r->done_sps = tl->sps;
        set_state(r, RS_VIEW_ST_DONE, r->state_t);
        break;
    case RS_TL_CKPT: break;
    case RS_TL_MICRO: /* a pipeline stage's forward or backward of one micro-batch: the gaps are its bubble */
        saw_time(vm, tl->t1);
        s = tl->work == 'F' ? RS_VIEW_ST_FORWARD : RS_VIEW_ST_BACKWARD;
        push_span(r, tl->t0, tl->t1, tl->step, s, false);
        if (tl->t1 >= tl->t0 && tl->micro >= 0 && tl->micro < INT16_MAX && tl->stage >= 0 && tl->stage < INT16_MAX) {
            rs_view_span *sp = &r->spans[(r->span_head + RS_VIEW_SPAN_N - 1) % RS_VIEW_SPAN_N];
            sp->micro = (int16_t)tl->micro, sp->stage = (int16_t)tl->stage; /* the schedule pane's cells */
            if (tl->stage >= vm->pipe_stages) vm->pipe_stages = tl->stage + 1;
        }
        set_state(r, s, tl->t1);
        break;
    case RS_TL_STAGE:
    case RS_TL_METRIC: break;
    }
}

void rs_view_feed_bench(rs_view_model *vm, const rs_bench_row *row)
{
    vm->fed++;
    vm->bench_op = row->op;
    rs_view_bench_row *b = &vm->bench[vm->bench_head];
    *b = (rs_view_bench_row){row->bytes, row->time_us, row->algbw, row->busbw, row->wrong};
    vm->bench_head = (vm->bench_head + 1) % RS_VIEW_BENCH_N;
    if (vm->n_bench < RS_VIEW_BENCH_N) vm->n_bench++;
    vm->bench_rows++;
    /* every rank took part in that size and is at the next one now (the ranks trace no events in a
     * bench: a thousand iterations a size would drown the pipe) */
    int world = vm->world > 0 ? vm->world : vm->nranks;
    /* the timeline: each size a span of communication as long as its measured iterations, one step a
     * size, laid end to end on the bench's own clock (the rows carry no time of day) */
    double t0 = vm->bench_clock;
    vm->bench_clock += row->time_us * 1e-6 * (row->iters > 0 ? row->iters : 1);
    for (int i = 0; i < world && i < RS_VIEW_MAX_RANKS; i++) {
        vm->ranks[i].seen = true;
        set_state(&vm->ranks[i], RS_VIEW_ST_COMM, vm->ranks[i].state_t);
        push_span(&vm->ranks[i], t0, vm->bench_clock, vm->bench_rows - 1, RS_VIEW_ST_COMM, true);
    }
    if (world > vm->nranks) vm->nranks = world < RS_VIEW_MAX_RANKS ? world : RS_VIEW_MAX_RANKS;
}

void rs_view_feed_data(rs_view_model *vm, const rs_data_line *d)
{
    rs_view_rank *r = rank_slot(vm, d->rank);
    if (!r) return;
    vm->fed++;
    saw_time(vm, d->t);
    /* the values before are those of the same collective, laid out the same way (what moved) */
    r->prev = r->data;
    r->has_prev = r->has_data && r->data.coll == d->coll && r->data.count == d->count &&
                  r->data.blocks == d->blocks && r->data.head == d->head && r->data.n == d->n;
    r->data = *d;
    r->has_data = true;
}

bool rs_view_has_data(const rs_view_model *vm, int *done)
{
    bool any = false;
    int most = 0;
    for (int i = 0; i < vm->nranks; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        if (!r->has_data || !vm->coll.any || r->data.coll != vm->coll.coll) continue;
        if (!any || r->data.done > most) most = r->data.done;
        any = true;
    }
    if (done) *done = most;
    return any;
}

void rs_view_data_phase(char *out, size_t cap, rs_pg_opkind op, rs_pg_algo algo, int world, int done, int steps)
{
    const char *phase = NULL;
    int k = done, of = steps;
    if (op == RS_OP_ALL_REDUCE && algo == RS_ALGO_RING && world > 1 && steps == 2 * (world - 1)) {
        /* the ring's two halves, each world-1 steps */
        of = world - 1;
        phase = done <= of ? "reduce-scatter" : "all-gather";
        if (done > of) k = done - of;
    } else if (op == RS_OP_ALL_REDUCE && algo == RS_ALGO_TREE && steps > 0 && steps % 2 == 0) {
        of = steps / 2;
        phase = done <= of ? "reduce" : "broadcast";
        if (done > of) k = done - of;
    }
    if (done <= 0 && steps > 0) snprintf(out, cap, "input (nothing moved yet)");
    else if (phase) snprintf(out, cap, "after %s step %d/%d%s", phase, k, of, done >= steps ? ": the result" : "");
    else if (steps > 0) snprintf(out, cap, "after step %d/%d%s", done, steps, done >= steps ? ": the result" : "");
    else snprintf(out, cap, "the result");
}

const rs_view_bench_row *rs_view_bench_at(const rs_view_model *vm, int i)
{
    if (i < 0 || i >= vm->n_bench) return NULL;
    return &vm->bench[(vm->bench_head - 1 - i + 2 * RS_VIEW_BENCH_N) % RS_VIEW_BENCH_N];
}

bool rs_view_all_done(const rs_view_model *vm)
{
    int world = vm->world > 0 ? vm->world : vm->nranks;
    if (world <= 0) return false;
    for (int i = 0; i < world && i < RS_VIEW_MAX_RANKS; i++)
        if (!vm->ranks[i].seen || vm->ranks[i].state != RS_VIEW_ST_DONE) return false;
    return true;
}

void rs_view_feed_log(rs_view_model *vm, int rank, const char *line)
{
    if (rank < -1 || rank >= RS_VIEW_MAX_RANKS) {
        vm->dropped++;
        return;
    }
    if (rank >= 0 && !strcmp(vm->kind, "p2p")) {
        /* p2p's sends and receives trace no events: a rank heard from has started, and does nothing
         * but send, receive and time them until it ends */
        rs_view_rank *r = rank_slot(vm, rank);
        if (r && r->state == RS_VIEW_ST_WAIT) set_state(r, RS_VIEW_ST_COMM, r->state_t);
    }
    rs_view_log_line *l = &vm->log[vm->log_head];
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    if (n > RS_VIEW_LOG_W - 1) {
        n = RS_VIEW_LOG_W - 1;
        while (n && ((unsigned char)line[n] & 0xC0) == 0x80) n--; /* do not split a UTF-8 sequence */
    }
    memcpy(l->text, line, n);
    l->text[n] = 0;
    l->rank = rank;
    vm->log_head = (vm->log_head + 1) % RS_VIEW_LOG_N;
    if (vm->n_log < RS_VIEW_LOG_N) vm->n_log++;
}

bool rs_view_feed_line(rs_view_model *vm, int rank, const char *line)
{
    if (line[0] != '@') {
        rs_view_feed_log(vm, rank, line);
        return true;
    }
    rs_pg_event ev;
    rs_train_line tl;
    rs_bench_row br;
    rs_data_line dl;
    uint64_t before = vm->fed;
    if (rs_wire_parse_event(line, &ev)) rs_view_feed_event(vm, &ev);
    else if (rs_wire_parse_data(line, &dl)) rs_view_feed_data(vm, &dl);
    else if (rs_wire_parse_train(line, &tl)) rs_view_feed_train(vm, &tl);
    else if (rs_wire_parse_bench(line, &br)) rs_view_feed_bench(vm, &br);
    else vm->ignored++;
    return vm->fed != before;
}
