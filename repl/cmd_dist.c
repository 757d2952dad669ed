/* Commands that start ranks — collective, bench, p2p — and `backends`. Each run spawns real rank
 * processes (`ringside --worker ...`, or under mpirun for backend=mpi), hosts their rendezvous store,
 * reads their output line by line (dist/worker/worker.h: human lines and '@' machine lines), stores
 * their trace events in the session log, and prints what they found. */
#define _GNU_SOURCE
#include <jansson.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "call.h"
#include "dist/launch/launch.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "dist/train/dtrain.h"
#include "dist/worker/worker.h"
#include "engine/ckpt/checkpoint.h"
#include "engine/cuda/cuda.h"
#include "lang/value.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"
#include "view_live.h"

#include "ranks_job.h"

int rs_cmd_jobs(rs_session *s, const rs_call *c)
{
    if (rs_call_given(c, "stop")) {
        long long id = rs_call_int(c, "stop", 0);
        const rs_optval *v = rs_call_opt(c, "stop");
        rs_job *j = s->jobs;
        while (j && j->id != id) j = j->next;
        if (!j)
            return rs_session_error(s, c, v->pos, 5 + strlen(v->text),
                                    "jobs: no run %lld in the background (`jobs` lists them)", id);
        rs_launch_stop(j->l);
        j->stopping = true;
        fprintf(s->out, "stopping run %lld (%s); its end will be printed here\n", id, j->kind->what);
        return 0;
    }
    if (!s->jobs) {
        fprintf(s->out, "no runs in the background (press q in the live view of a run to send it there)\n");
        return 0;
    }
    fprintf(s->out, "  %-6s %-11s %5s %9s  %s\n", "run", "kind", "ranks", "elapsed", "what");
    double now = rs_pg_now();
    for (const rs_job *j = s->jobs; j; j = j->next) {
        char what[160];
        if (j->mname[0]) snprintf(what, sizeof what, "%s on %s, %s on %s", j->mname, j->dname, j->mode, j->backend);
        else snprintf(what, sizeof what, "on %s", j->backend);
        fprintf(s->out, "  %-6lld %-11s %5d %8.1fs  %s%s\n", (long long)j->id, j->kind->what, j->world,
                now - j->t_begin, what, j->stopping ? " (stopping)" : "");
    }
    return 0;
}

/* ---------------------------------------------------------------- collective */

/* A collective's own state (j->state): what the end prints and records. */
typedef struct coll_job {
    rs_job_checks chk;        /* each rank's @check */
    rs_job_vals vals;         /* the buffers the ranks sent (@vals) */
    char algo[32];            /* the algorithm the steps reported */
    int steps;                /* the most steps a rank took (a tree's reduce and broadcast count both) */
    int *rank_steps;          /* (world) owned: the steps each rank took part in */
    double *sent;             /* (world) owned: bytes of the steps that send (peer >= 0) */
    rs_pg_opkind op;
    rs_dtype dt;
    long long count;
    char redop[16];
} coll_job;

static bool coll_init(rs_job *j)
{
    coll_job *k = j->state;
    k->rank_steps = calloc((size_t)j->world, sizeof *k->rank_steps);
    k->sent = calloc((size_t)j->world, sizeof *k->sent);
    return rs_job_checks_init(&k->chk, j->world) && k->rank_steps && k->sent;
}

/* The algorithm's steps: which it was, how many a rank took, the bytes each rank sent. */
static void coll_event(rs_job *j, const rs_pg_event *ev)
{
    coll_job *k = j->state;
    if (ev->kind != RS_PG_EV_STEP) return;
    if (!k->algo[0]) snprintf(k->algo, sizeof k->algo, "%s", rs_pg_algo_name(ev->algo));
    if (ev->rank >= j->world) return;
    if (++k->rank_steps[ev->rank] > k->steps) k->steps = k->rank_steps[ev->rank];
    if (ev->peer >= 0) k->sent[ev->rank] += (double)ev->bytes;
}

static bool coll_line(rs_job *j, const char *line)
{
    coll_job *k = j->state;
    return rs_job_checks_line(&k->chk, j->world, line) || rs_job_vals_line(&k->vals, j->world, line);
}

static void coll_free(rs_job *j)
{
    coll_job *k = j->state;
    rs_job_checks_free(&k->chk);
    rs_job_vals_free(&k->vals);
    free(k->rank_steps);
    free(k->sent);
}

/* What `expect` reads after a collective (docs/repl.md lists it). */
static void record_collective(rs_job *j, double slowest, uint64_t wrong)
{
    rs_session *s = j->s;
    coll_job *k = j->state;
    rs_job_vals_record(&k->vals, s);
    rs_result_main(s, "out");
    rs_result_num(s, "world", j->world);
    rs_result_num(s, "count", (double)k->count);
    rs_result_num(s, "bytes", (double)k->count * (double)rs_dtype_size(k->dt));
    rs_result_num(s, "steps", k->steps);
    rs_result_num(s, "time_us", slowest * 1e6);
    rs_result_num(s, "wrong", (double)wrong);
    for (int r = 0; r < j->world; r++) {
        rs_result_rank(s, "time_us", r, k->chk.seconds[r] * 1e6);
        rs_result_rank(s, "sent_bytes", r, k->sent[r]);
    }
}

/* The job's end: the ranks' lines in rank order, the verdict, the run's end in the log. */
static int collective_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    coll_job *k = j->state;
    rs_job_print_lines(j, "  ");
    if (rc) return rc;
    uint64_t wrong;
    double slowest;
    int missing;
    rs_job_checks_sum(&k->chk, j->world, &wrong, &slowest, &missing);
    char when[32], algo[64] = "";
    if (slowest < 1e-3) snprintf(when, sizeof when, "%.1f us", slowest * 1e6);
    else snprintf(when, sizeof when, "%.3f ms", slowest * 1e3);
    if (k->steps)
        snprintf(algo, sizeof algo, ", %s%s%d step%s", strcmp(k->algo, "auto") ? k->algo : "",
                 strcmp(k->algo, "auto") ? " in " : "", k->steps, k->steps == 1 ? "" : "s");
    rs_pg_opkind op = k->op;
    bool reduces = op == RS_OP_REDUCE || op == RS_OP_ALL_REDUCE || op == RS_OP_REDUCE_SCATTER;
    char red[32] = "";
    if (reduces) snprintf(red, sizeof red, " (%s)", k->redop);
    fprintf(s->out, "%s%s of %lld x %s on %d ranks, %s%s: %s (slowest rank)\n", rs_pg_op_name(op), red, k->count,
            rs_dtype_name(k->dt), j->world, j->backend, algo, when);
    if (missing || wrong) {
        for (int r = 0; r < j->world; r++)
            if (k->chk.wrong[r]) fprintf(s->out, "  rank %d: %llu elements differ from the serial computation\n", r,
                                         (unsigned long long)k->chk.wrong[r]);
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "collective: %s", missing ? "some ranks did not report a result"
                                                                                : "wrong results (see above)");
        rs_log_run_end(s, j->run, "failed", 1, NULL, s->last_error);
    } else {
        fprintf(s->out, "every rank's result equals the serial computation%s\n",
                j->run > 0 ? "; trace in the session log" : "");
        if (!j->background) record_collective(j, slowest, wrong);
        json_t *o = json_pack("{s:f, s:I}", "seconds", slowest, "events", (json_int_t)j->nevents);
        char *final = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL; /* owned here */
        rs_log_run_end(s, j->run, "done", 1, final, NULL);
        free(final);
        json_decref(o);
    }
    return rc;
}

static const rs_job_kind collective_kind = {
    .what = "collective", .state_size = sizeof(coll_job), .collect = true, .coll_data = true,
    .init = coll_init, .event = coll_event, .line = coll_line, .finish = collective_end, .free = coll_free,
};

/* Bytes this machine can still give (MemAvailable in /proc/meminfo; free pages where that is missing),
 * and where the figure came from. */
static double mem_available(const char **from)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) {
        *from = "MemAvailable in /proc/meminfo";
        return (double)kb * 1024.0;
    }
    *from = "free pages (sysconf)";
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
}

/* Refuses (before any rank starts) a collective whose buffers cannot fit in this machine's memory:
 * each rank holds its input, its output (unless the op works in place) and the expected result it
 * checks against, so count x dtype size x buffers x ranks. 0, or the command's rc after the error. */
static int refuse_too_big(rs_session *s, const rs_call *c, rs_pg_opkind op, rs_dtype dt, long long count, int world)
{
    double W = world, nin = 1, nout = 1;
    bool in_place = op == RS_OP_BROADCAST || op == RS_OP_ALL_REDUCE || op == RS_OP_REDUCE;
    switch (op) {
    case RS_OP_SCATTER: case RS_OP_REDUCE_SCATTER: nin = W; break;
    case RS_OP_GATHER: case RS_OP_ALL_GATHER: nout = W; break;
    case RS_OP_ALL_TO_ALL: nin = nout = W; break;
    case RS_OP_BARRIER: return 0;
    default: break;
    }
    double bufs = nin + (in_place ? 0 : nout) + nout; /* in, out, the expected result */
    double es = (double)rs_dtype_size(dt), need = (double)count * es * bufs * W;
    const char *from;
    double have = mem_available(&from);
    if (have <= 0 || need <= have) return 0;
    const rs_optval *v = rs_call_given(c, "count") ? rs_call_opt(c, "count") : rs_call_opt(c, "size");
    size_t pos = v && v->set ? v->pos : (size_t)-1, len = v && v->set ? strlen(v->text) + 6 : 0;
    return rs_session_error(s, c, pos, len,
                            "collective: %lld x %s (%g B) x %g buffers per rank (in, %sexpected) x %d ranks = %.1f GB, "
                            "more than the %.1f GB available (%s); use a smaller count or fewer ranks",
                            count, rs_dtype_name(dt), es, bufs, in_place ? "" : "out, ", world, need / 1e9, have / 1e9,
                            from);
}

int rs_cmd_collective(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_pg_opkind op;
    if (rs_job_parse_op(s, c, &op)) return 1;
    rs_job *j = rs_job_new(s, c, &collective_kind);
    if (!j) return 1;
    coll_job *k = j->state;
    rs_dtype dt = RS_F32;
    const char *dts = rs_call_str(c, "dtype", "f32");
    rs_dtype_from_name(dts, &dt); /* the table's choices are all names it knows */
    long long count = rs_call_int(c, "count", 2);
    if (rs_call_given(c, "size") && !rs_call_given(c, "count"))
        count = (long long)(rs_call_opt(c, "size")->v.size / rs_dtype_size(dt));
    long long root = rs_call_int(c, "root", 0);
    if (count < 0 || count > (1ll << 31)) {
        const rs_optval *v = rs_call_given(c, "count") ? rs_call_opt(c, "count") : rs_call_opt(c, "size");
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 6, "collective: %lld elements per rank is out of range "
                                "(0..2^31)", count);
    }
    if (root < 0 || root >= j->world) {
        const rs_optval *v = rs_call_opt(c, "root");
        int world = j->world;
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 5, "collective: root %lld is not a rank (0..%d)", root,
                                world - 1);
    }
    if (refuse_too_big(s, c, op, dt, count, j->world)) {
        rs_job_free(j);
        return 1;
    }
    k->op = op;
    k->dt = dt;
    k->count = count;
    snprintf(k->redop, sizeof k->redop, "%s", rs_call_str(c, "op", "sum"));
    j->run = rs_log_run_begin_dist(s, "collective", NULL, NULL, NULL, c, "collective", j->backend, j->world);
    char a_op[48], a_cnt[48], a_dt[24], a_red[32], a_algo[48], a_root[24], a_show[24], a_be[48];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_cnt, sizeof a_cnt, "count=%lld", count);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", rs_dtype_name(dt));
    snprintf(a_red, sizeof a_red, "redop=%s", k->redop);
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_root, sizeof a_root, "root=%lld", root);
    snprintf(a_show, sizeof a_show, "show=%lld", rs_call_int(c, "show", 16));
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be, a_op, a_cnt, a_dt, a_red, a_algo, a_root, a_show, "trace=1"};
    return rs_job_run(j, args, 9);
}

/* ---------------------------------------------------------------- bench */

/* A bench's own state (j->state): the rows so far, for nccl-tests' footer. */
typedef struct bench_job {
    int nrows;
    double busbw_sum;
    uint64_t wrong_rows;
    rs_pg_opkind op;
} bench_job;

/* One more number at the end of a vector of the last result (bench: a column of the table). */
static void append_num(rs_session *s, const char *name, double v)
{
    const rs_result_val *old = rs_result_find(s->results, name, -1);
    int n = old ? old->n : 0;
    double *buf = malloc(sizeof *buf * (size_t)(n + 1));
    if (!buf) return;
    if (n) memcpy(buf, old->v, sizeof *buf * (size_t)n);
    buf[n] = v;
    rs_result_vec(s, name, -1, buf, n + 1);
    free(buf);
}

/* For `expect busbw.1M > 0` (repl/result.h): the row by its size, and a column of each figure. */
static void record_row(rs_session *s, const rs_bench_row *r)
{
    char size[32], name[64];
    rs_val_fmt_size(r->bytes, size, sizeof size);
    const char *names[] = {"busbw", "algbw", "time_us", "wrong"};
    double vals[] = {r->busbw, r->algbw, r->time_us, (double)r->wrong};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", names[i], size);
        rs_result_num(s, name, vals[i]);
        append_num(s, names[i], vals[i]);
    }
    append_num(s, "size", (double)r->bytes);
}

static void bench_row(rs_job *j, const rs_bench_row *r)
{
    bench_job *k = j->state;
    FILE *f = j->held.f ? j->held.f : j->s->out; /* the background's rows are printed at its end */
    /* the view has the row in its bench pane (fed from the @bench line): the table's text, as wide as
     * nccl-tests prints it, stays out of its narrower log pane and is printed when the view closes */
    bool quiet = j->live && f == j->s->out;
    if (quiet) rs_live_quiet(j->live, true);
    if (k->nrows++ == 0) {
        fprintf(f, "#\n#%12s %13s %6s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw",
                "busbw", "#wrong");
        fprintf(f, "#%12s %13s %6s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    fprintf(f, " %12llu %13llu %6s %7s %10.2f %8.2f %8.2f %7llu\n", (unsigned long long)r->bytes,
            (unsigned long long)r->count, rs_dtype_name(r->dtype), rs_redop_name(r->redop), r->time_us, r->algbw,
            r->busbw, (unsigned long long)r->wrong);
    fflush(f);
    if (quiet) rs_live_quiet(j->live, false);
    k->busbw_sum += r->busbw;
    if (r->wrong) k->wrong_rows++;
    int64_t step = (int64_t)r->bytes;
    rs_log_metric(j->s, j->run, step, 0, "time_us", r->time_us);
    rs_log_metric(j->s, j->run, step, 0, "algbw", r->algbw);
    rs_log_metric(j->s, j->run, step, 0, "busbw", r->busbw);
    rs_log_metric(j->s, j->run, step, 0, "wrong", (double)r->wrong);
    if (!j->background) record_row(j->s, r);
}

static bool bench_line(rs_job *j, const char *line)
{
    rs_bench_row row;
    if (!rs_wire_parse_bench(line, &row)) return false;
    bench_row(j, &row);
    return true;
}

/* The job's end: nccl-tests' footer and the run's end in the log. */
static int bench_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    bench_job *k = j->state;
    if (rc) return rc;
    double avg = k->nrows ? k->busbw_sum / k->nrows : 0;
    fprintf(s->out, "# Out of bounds values : %llu %s\n", (unsigned long long)k->wrong_rows,
            k->wrong_rows ? "WRONG" : "OK");
    fprintf(s->out, "# Avg bus bandwidth    : %.4f GB/s\n#\n", avg);
    if (!j->background) {
        rs_result_num(s, "avg_busbw", avg);
        rs_result_num(s, "rows", k->nrows);
        rs_result_num(s, "wrong", (double)k->wrong_rows);
        rs_result_num(s, "world", j->world);
        rs_result_num(s, "bus_factor", rs_pg_bus_factor(k->op, j->world));
    }
    json_t *o = json_pack("{s:f, s:i}", "avg_busbw", avg, "rows", k->nrows);
    char *final = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL; /* owned here */
    rs_log_run_end(s, j->run, k->wrong_rows ? "failed" : "done", k->nrows, final,
                   k->wrong_rows ? "wrong results" : NULL);
    free(final);
    json_decref(o);
    if (k->wrong_rows) rc = rs_session_error(s, j->c, (size_t)-1, 0, "bench: some sizes gave wrong results");
    return rc;
}

static const rs_job_kind bench_kind = {
    .what = "bench", .state_size = sizeof(bench_job), .line = bench_line, .finish = bench_end,
};

int rs_cmd_bench(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_pg_opkind op;
    if (rs_job_parse_op(s, c, &op)) return 1;
    rs_job *j = rs_job_new(s, c, &bench_kind);
    if (!j) return 1;
    uint64_t lo, hi;
    rs_err e = {0};
    const rs_optval *sv = rs_call_opt(c, "sizes");
    if (rs_val_size_range(rs_call_str(c, "sizes", "8..64M"), &lo, &hi, &e) || lo == 0 || hi > (1ull << 32)) {
        rs_job_free(j);
        return rs_session_error(s, c, sv->pos, strlen(sv->text) + 6, "bench: sizes: %s",
                                e.msg[0] ? e.msg : "give LO..HI between 1 and 4G, e.g. sizes=8..64M");
    }
    const char *dts = rs_call_str(c, "dtype", "f32");
    for (uint64_t b = lo; b <= hi; b *= 2) { /* the sizes the ranks will go through, as job_bench doubles */
        j->steps_total++;
        if (b > UINT64_MAX / 2) break;
    }
    ((bench_job *)j->state)->op = op;
    j->run = rs_log_run_begin_dist(s, "bench", NULL, NULL, NULL, c, "bench", j->backend, j->world);
    fprintf(s->out, "# bench %s: %d ranks, %s backend, %s, %s%s\n", rs_pg_op_name(op), j->world, j->backend, dts,
            rs_call_str(c, "op", "sum"), j->run > 0 ? "" : " (no session log)");
    char a_op[48], a_lo[48], a_hi[48], a_dt[24], a_red[32], a_algo[48], a_it[32], a_be[48];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_lo, sizeof a_lo, "minbytes=%llu", (unsigned long long)lo);
    snprintf(a_hi, sizeof a_hi, "maxbytes=%llu", (unsigned long long)hi);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", dts);
    snprintf(a_red, sizeof a_red, "redop=%s", rs_call_str(c, "op", "sum"));
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be, a_op, a_lo, a_hi, a_dt, a_red, a_algo, a_it};
    return rs_job_run(j, args, 8);
}

/* ---------------------------------------------------------------- p2p */

/* p2p's own state (j->state): each rank's verdict, the buffers, rank 0's timings. */
typedef struct p2p_job {
    rs_job_checks chk;
    rs_job_vals vals;
    rs_p2p_times p2p;
    bool have_p2p;
} p2p_job;

static bool p2p_init(rs_job *j) { return rs_job_checks_init(&((p2p_job *)j->state)->chk, j->world); }

static bool p2p_line(rs_job *j, const char *line)
{
    p2p_job *k = j->state;
    if (rs_job_checks_line(&k->chk, j->world, line) || rs_job_vals_line(&k->vals, j->world, line)) return true;
    if (!rs_wire_parse_p2p(line, &k->p2p)) return false;
    k->have_p2p = true;
    return true;
}

static void p2p_free(rs_job *j)
{
    p2p_job *k = j->state;
    rs_job_checks_free(&k->chk);
    rs_job_vals_free(&k->vals);
}

static int p2p_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    p2p_job *k = j->state;
    rs_job_print_lines(j, "");
    if (rc) return rc;
    bool bad = k->chk.wrong[0] || k->chk.wrong[1] || !k->chk.checked[0] || !k->chk.checked[1];
    if (bad) rc = rs_session_error(s, j->c, (size_t)-1, 0, "p2p: the received data was not the peer's");
    if (!bad && !j->background) {
        rs_job_vals_record(&k->vals, s);
        rs_result_main(s, "data");
        rs_result_num(s, "wrong", (double)(k->chk.wrong[0] + k->chk.wrong[1]));
        if (k->have_p2p) {
            const rs_p2p_times *t = &k->p2p;
            rs_result_num(s, "bytes", (double)t->bytes);
            rs_result_num(s, "iters", t->iters);
            rs_result_num(s, "oneway_us", t->oneway * 1e6);
            rs_result_num(s, "exchange_us", t->exchange * 1e6);
            rs_result_num(s, "compute_us", t->compute * 1e6);
            rs_result_num(s, "blocking_us", t->blocking * 1e6);
            rs_result_num(s, "isend_us", t->isend * 1e6);
            rs_result_num(s, "isend_test_us", t->isend_test * 1e6);
        }
    }
    rs_log_run_end(s, j->run, bad ? "failed" : "done", 1, NULL, bad ? "wrong data" : NULL);
    return rc;
}

static const rs_job_kind p2p_kind = {
    .what = "p2p", .state_size = sizeof(p2p_job), .collect = true, .init = p2p_init,
    .line = p2p_line, .finish = p2p_end, .free = p2p_free,
};

int rs_cmd_p2p(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_job *j = rs_job_new(s, c, &p2p_kind);
    if (!j) return 1;
    if (j->world < 2) {
        const rs_optval *v = rs_call_opt(c, "ranks");
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text), "p2p: needs 2 ranks or more");
    }
    uint64_t size = rs_call_opt(c, "size")->v.size;
    if (size < 4 || size > (1ull << 31)) {
        const rs_optval *v = rs_call_opt(c, "size");
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text), "p2p: size must be 4 bytes .. 2G");
    }
    j->run = rs_log_run_begin_dist(s, "p2p", NULL, NULL, NULL, c, "p2p", j->backend, j->world);
    char a_size[48], a_be[48], a_it[32];
    snprintf(a_size, sizeof a_size, "size=%llu", (unsigned long long)size);
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    const char *args[] = {a_be, a_size, a_it};
    return rs_job_run(j, args, 3);
}

/* ---------------------------------------------------------------- world */

static bool world_line(rs_job *j, const char *line) { return rs_job_nums_line(j->state, j->world, line); }
static void world_free(rs_job *j) { rs_job_nums_free(j->state); }

/* The job's end: who each rank is, in rank order, what that makes, and how to start the same by hand. */
static int world_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    rs_job_print_lines(j, "  ");
    if (rc) return rc;
    int per = j->per_node ? j->per_node : j->world, nodes = j->world / per;
    bool mpi = rs_pg_backend_find(j->backend)->needs_launcher;
    if (j->hosts[0]) /* hostfile=: mpirun placed them, host by host */
        fprintf(s->out, "world size %d: ranks 0..%d on hosts %s (host:ranks), %s backend\n", j->world, j->world - 1,
                j->hosts, j->backend);
    else
        fprintf(s->out, "world size %d: ranks 0..%d, %d node%s of %d (local ranks 0..%d), %s backend\n", j->world,
                j->world - 1, nodes, nodes == 1 ? "" : "s", per, per - 1, j->backend);
    if (mpi) fprintf(s->out, "mpirun started them and wired them up%s\n", j->hosts[0] ? " through its rsh agent" : "");
    else if (j->hosts[0]) /* tcp across hosts: started through the rsh agent, rank 0's host runs the store */
        fprintf(s->out, "they met at MASTER_ADDR=%.*s MASTER_PORT=%d (rank 0's rendezvous store, on its host), each "
                "started there through ssh or RINGSIDE_RSH_AGENT\n", (int)strcspn(j->hosts, ":,"), j->hosts, j->master_port);
    else fprintf(s->out, "they met at MASTER_ADDR=127.0.0.1 MASTER_PORT=%d (%s's rendezvous store)\n", j->master_port,
                 j->store_rank0 ? "rank 0" : "ringside");
    fprintf(s->out, "every rank counted %d with an all_reduce of ones: they all joined\n", j->world);
    if (j->store_rank0) {
        /* what a person types to start the same ranks, one shell each (a node's ranks share a machine) */
        fprintf(s->out, "rank 0 hosted the rendezvous store itself, as ranks started by hand do:\n");
        fprintf(s->out, "  export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=%d", j->master_port, j->world);
        if (nodes > 1) fprintf(s->out, " LOCAL_WORLD_SIZE=%d", per);
        fputc('\n', s->out);
        for (int r = 0; r < j->world; r++) {
            if (r == 2 && j->world > 3) {
                fprintf(s->out, "  ...\n");
                r = j->world - 1;
            }
            char node[64] = "";
            if (nodes > 1) snprintf(node, sizeof node, " LOCAL_RANK=%d GROUP_RANK=%d", r % per, r / per);
            fprintf(s->out, "  RANK=%d%s ringside --worker world%s%s\n", r, node, strcmp(j->backend, "shm") ? " backend=" : "",
                    strcmp(j->backend, "shm") ? j->backend : "");
        }
    }
    rs_log_run_end(s, j->run, "done", 1, NULL, NULL);
    if (j->background) return rc;
    rs_result_num(s, "world", j->world);
    rs_result_num(s, "nodes", nodes);
    rs_result_num(s, "per_node", per);
    const rs_job_nums *nums = j->state;
    for (int i = 0; i < nums->n; i++) rs_result_rank(s, nums->v[i].name, nums->v[i].rank, nums->v[i].v);
    return rc;
}

/* The world's state (j->state) is the ranks' named numbers (@num): who each one was told it is. */
static const rs_job_kind world_kind = {
    .what = "world", .state_size = sizeof(rs_job_nums), .collect = true, .line = world_line,
    .finish = world_end, .free = world_free,
};

int rs_cmd_world(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_job *j = rs_job_new(s, c, &world_kind);
    if (!j) return 1;
    long long nodes = rs_call_int(c, "nodes", 1);
    const rs_optval *nv = rs_call_opt(c, "nodes");
    bool mpi = rs_pg_backend_find(j->backend)->needs_launcher;
    if (nodes < 1 || j->world % nodes) {
        int world = j->world;
        rs_job_free(j);
        return rs_session_error(s, c, nv->pos, 6 + strlen(nv->text),
                                "world: %lld nodes do not share %d ranks evenly; give a divisor of %d", nodes, world,
                                world);
    }
    j->store_rank0 = !strcmp(rs_call_str(c, "store", "launcher"), "rank0");
    if (mpi && (nodes > 1 || j->store_rank0)) {
        const rs_optval *v = nodes > 1 ? nv : rs_call_opt(c, "store");
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 6,
                                "world: mpirun numbers its ranks and wires them up itself; nodes= and store= apply to "
                                "shm and tcp");
    }
    j->per_node = j->world / (int)nodes;
    j->run = rs_log_run_begin_dist(s, "world", NULL, NULL, NULL, c, "world", j->backend, j->world);
    char a_be[48];
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be};
    return rs_job_run(j, args, 1);
}

/* ---------------------------------------------------------------- backends */

int rs_cmd_backends(rs_session *s, const rs_call *c)
{
    (void)c;
    rs_result_begin(s, NULL);
    FILE *f = s->out;
    const char *lang = getenv("LC_ALL");
    if (!lang || !*lang) lang = getenv("LC_CTYPE");
    if (!lang || !*lang) lang = getenv("LANG");
    bool utf8 = lang && (strstr(lang, "UTF-8") || strstr(lang, "utf8") || strstr(lang, "UTF8"));
    const char *yes = utf8 ? "✓" : "y", *no = utf8 ? "✘" : "-";
    const rs_pg_backend *b = rs_pg_backends();
    int nb = 0;
    while (b[nb].name) nb++;
    fprintf(f, "Process-group backends in this build: which operation runs where (read from each backend's table)\n\n");
    fprintf(f, "%-16s", "");
    for (int i = 0; i < nb; i++) fprintf(f, "  %-9s", b[i].name);
    fprintf(f, "\n%-16s", "");
    for (int i = 0; i < nb; i++) fprintf(f, "  CPU  GPU ");
    fputc('\n', f);
    static const char *const rows[] = {"send", "recv", "isend/irecv", "broadcast", "reduce", "all_reduce",
                                       "scatter", "gather", "all_gather", "reduce_scatter", "all_to_all",
                                       "barrier", "new_group"};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        fprintf(f, "%-16s", rows[r]);
        for (int i = 0; i < nb; i++) {
            const rs_pg_ops *o = b[i].ops;
            const void *fn[] = {(const void *)o->send, (const void *)o->recv, (const void *)o->isend,
                                (const void *)o->broadcast, (const void *)o->reduce, (const void *)o->all_reduce,
                                (const void *)o->scatter, (const void *)o->gather, (const void *)o->all_gather,
                                (const void *)o->reduce_scatter, (const void *)o->all_to_all,
                                (const void *)o->barrier, (const void *)o->new_group};
            bool have = fn[r] != NULL, cpu = have && (o->devices & RS_PG_DEV_CPU), gpu = have && (o->devices & RS_PG_DEV_GPU);
            fprintf(f, "   %s    %s  ", cpu ? yes : no, gpu ? yes : no);
            char op[24], name[64]; /* for `expect shm.isend.cpu = 1`: isend/irecv is isend */
            snprintf(op, sizeof op, "%s", rows[r]);
            op[strcspn(op, "/")] = '\0';
            snprintf(name, sizeof name, "%s.%s.cpu", b[i].name, op);
            rs_result_num(s, name, cpu);
            snprintf(name, sizeof name, "%s.%s.gpu", b[i].name, op);
            rs_result_num(s, name, gpu);
        }
        fputc('\n', f);
    }
    fputc('\n', f);
    rs_result_num(s, "backends", nb);
    for (int i = 0; i < nb; i++) fprintf(f, "  %-5s %s\n        %s\n", b[i].name, b[i].about, b[i].ops->algos);
    for (const char *const *n = rs_pg_backend_names; *n; n++)
        if (!rs_pg_backend_find(*n))
            fprintf(f, "  %-5s not built: meson did not find %s\n", *n,
                    !strcmp(*n, "mpi") ? "Open MPI (apt-get install libopenmpi-dev)" : "CUDA and NCCL");
    if (rs_pg_backend_find("nccl")) {
        rs_cuda_info ci;
        rs_cuda_query(&ci);
        fprintf(f, "\nGPUs here: %d. nccl puts rank LOCAL_RANK on GPU LOCAL_RANK mod %d, one GPU per rank: NCCL "
                   "refuses two ranks of one group on one GPU (ncclInvalidUsage, \"Duplicate GPU detected\"), so "
                   "with fewer GPUs than ranks the ranks share the host through shm or tcp instead.\n",
                ci.count, ci.count > 0 ? ci.count : 1);
        rs_result_num(s, "gpus", ci.count);
    }
    fprintf(f, "\nTry: collective all_reduce ranks=4 backend=shm algo=ring   bench all_reduce ranks=2 sizes=8..64M\n");
    return 0;
}

