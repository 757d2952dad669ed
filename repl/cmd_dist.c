/* Commands that start ranks — collective, bench, p2p — and `backends`. Each run spawns real rank
 * processes (`ringside --worker ...`, or under mpirun for backend=mpi), hosts their rendezvous store,
 * reads their output line by line (dist/worker/worker.h: human lines and '@' machine lines), stores
 * their trace events in the session log, and prints what they found. */
#define _GNU_SOURCE
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
#include "dist/worker/worker.h"
#include "lang/value.h"
#include "repl_log.h"
#include "session.h"

/* ---------------------------------------------------------------- one job across ranks */

typedef struct dist_job {
    rs_session *s;
    const rs_call *c;
    const char *what;       /* "collective", "bench", "p2p" */
    const char *backend;
    int world;
    int64_t run;
    double mono_to_unix;    /* add to a rank's monotonic stamp (same host) */
    bool collect;           /* keep human lines to print in rank order at the end */
    char **lines;           /* (nlines) owned */
    int *line_rank;
    int nlines, cap;
    /* per rank (world), owned */
    uint64_t *wrong;
    double *seconds, *begin_t;
    bool *checked;
    int64_t nevents;
    char algo[32];          /* the algorithm the steps reported */
    int steps;
    /* bench */
    int nrows;
    double busbw_sum;
    uint64_t wrong_rows;
} dist_job;

static void keep_line(dist_job *j, int rank, const char *line)
{
    if (j->nlines == j->cap) {
        int cap = j->cap ? 2 * j->cap : 16;
        char **l = realloc(j->lines, sizeof *l * (size_t)cap);
        if (!l) return;
        j->lines = l;
        int *r = realloc(j->line_rank, sizeof *r * (size_t)cap);
        if (!r) return;
        j->line_rank = r;
        j->cap = cap;
    }
    char *copy = strdup(line);
    if (!copy) return;
    j->lines[j->nlines] = copy;
    j->line_rank[j->nlines++] = rank;
}

/* "rank 3: ..." lines carry their own rank (mpirun's output all comes through one pipe). */
static int line_owner(const char *line, int fallback)
{
    int r;
    return sscanf(line, "rank %d:", &r) == 1 ? r : fallback;
}

static void log_trace(dist_job *j, const rs_pg_event *ev)
{
    static const char *const kinds[] = {"coll_begin", "coll_step", "coll_end"};
    rs_slog_event_info e = RS_SLOG_EVENT_INIT;
    e.rank = ev->rank;
    e.t = ev->t + j->mono_to_unix;
    e.kind = kinds[ev->kind];
    e.name = rs_pg_op_name(ev->op);
    e.coll = (int64_t)ev->coll;
    e.algo = rs_pg_algo_name(ev->algo);
    e.bytes = (int64_t)ev->bytes;
    char detail[64];
    if (ev->kind == RS_PG_EV_STEP) {
        e.astep = ev->step;
        e.peer = ev->peer;
        e.chunk = ev->chunk;
        snprintf(detail, sizeof detail, "{\"steps\":%d,\"group\":%d}", ev->steps, ev->group);
        e.detail_json = detail;
        if (!j->algo[0]) snprintf(j->algo, sizeof j->algo, "%s", rs_pg_algo_name(ev->algo));
        if (ev->steps > j->steps) j->steps = ev->steps;
    } else if (ev->group) {
        snprintf(detail, sizeof detail, "{\"group\":%d}", ev->group);
        e.detail_json = detail;
    }
    if (ev->rank < j->world) {
        if (ev->kind == RS_PG_EV_BEGIN) j->begin_t[ev->rank] = ev->t;
        if (ev->kind == RS_PG_EV_END) e.value = ev->t - j->begin_t[ev->rank];
    }
    rs_log_event(j->s, j->run, &e);
    j->nevents++;
}

static void bench_row(dist_job *j, const rs_bench_row *r)
{
    FILE *f = j->s->out;
    if (j->nrows++ == 0) {
        fprintf(f, "#\n#%12s %13s %6s %7s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time", "algbw",
                "busbw", "#wrong");
        fprintf(f, "#%12s %13s %6s %7s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    fprintf(f, " %12llu %13llu %6s %7s %10.2f %8.2f %8.2f %7llu\n", (unsigned long long)r->bytes,
            (unsigned long long)r->count, rs_dtype_name(r->dtype), rs_redop_name(r->redop), r->time_us, r->algbw,
            r->busbw, (unsigned long long)r->wrong);
    fflush(f);
    j->busbw_sum += r->busbw;
    if (r->wrong) j->wrong_rows++;
    int64_t step = (int64_t)r->bytes;
    rs_log_metric(j->s, j->run, step, 0, "time_us", r->time_us);
    rs_log_metric(j->s, j->run, step, 0, "algbw", r->algbw);
    rs_log_metric(j->s, j->run, step, 0, "busbw", r->busbw);
    rs_log_metric(j->s, j->run, step, 0, "wrong", (double)r->wrong);
}

static void on_line(void *ud, int rank, int is_stderr, const char *line)
{
    dist_job *j = ud;
    if (!is_stderr && line[0] == '@') {
        rs_pg_event ev;
        rs_bench_row row;
        int r;
        uint64_t wrong;
        double secs;
        if (rs_wire_parse_event(line, &ev)) {
            log_trace(j, &ev);
            return;
        }
        if (rs_wire_parse_check(line, &r, &wrong, &secs)) {
            if (r < j->world) {
                j->wrong[r] = wrong;
                j->seconds[r] = secs;
                j->checked[r] = true;
            }
            return;
        }
        if (rs_wire_parse_bench(line, &row)) {
            bench_row(j, &row);
            return;
        }
    }
    int owner = line_owner(line, rank);
    if (j->collect && !is_stderr) {
        keep_line(j, owner, line);
        return;
    }
    if (is_stderr && owner == rank && strncmp(line, "rank ", 5) != 0) fprintf(j->s->out, "[rank %d] %s\n", rank, line);
    else fprintf(j->s->out, "%s\n", line);
    fflush(j->s->out);
}

static int stop_requested(void *ud)
{
    dist_job *j = ud;
    return j->s->interrupt && *j->s->interrupt;
}

static int by_rank(const void *a, const void *b, void *ud)
{
    const int *r = ud;
    int x = *(const int *)a, y = *(const int *)b;
    return r[x] != r[y] ? (r[x] > r[y]) - (r[x] < r[y]) : (x > y) - (x < y);
}

/* The kept lines: those a rank tagged ("rank 2: ...") in rank order, then the others as they came. */
static void print_lines(dist_job *j, const char *indent)
{
    int *idx = malloc(sizeof *idx * (size_t)(j->nlines + 1));
    if (!idx) return;
    int n = 0;
    for (int i = 0; i < j->nlines; i++)
        if (!strncmp(j->lines[i], "rank ", 5)) idx[n++] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, by_rank, j->line_rank);
    for (int i = 0; i < j->nlines; i++)
        if (strncmp(j->lines[i], "rank ", 5)) idx[n++] = i;
    for (int i = 0; i < n; i++) fprintf(j->s->out, "%s%s\n", indent, j->lines[idx[i]]);
    free(idx);
}

static void job_free(dist_job *j)
{
    for (int i = 0; i < j->nlines; i++) free(j->lines[i]);
    free(j->lines);
    free(j->line_rank);
    free(j->wrong);
    free(j->seconds);
    free(j->begin_t);
    free(j->checked);
}

static double mono_to_unix(void)
{
    struct timespec m, r;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    return (double)(r.tv_sec - m.tv_sec) + (double)(r.tv_nsec - m.tv_nsec) * 1e-9;
}

/* Starts the ranks with `job_args` (after `--worker JOB`), waits for them, and reports a failure.
 * Returns 0 when every rank exited 0. */
static int run_ranks(dist_job *j, const char *const *job_args, int nargs, double timeout_s)
{
    rs_session *s = j->s;
    const rs_call *c = j->c;
    rs_err e = {0};
    const rs_pg_backend *be = rs_pg_backend_find(j->backend);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return rs_session_error(s, c, (size_t)-1, 0, "%s: cannot find the ringside binary to start ranks", j->what);
    exe[n] = 0;

    rs_store_server *srv = NULL;
    if (!be->needs_launcher && rs_store_server_start("127.0.0.1", 0, &srv, &e))
        return rs_session_error(s, c, (size_t)-1, 0, "%s: starting the rendezvous store: %s", j->what, e.msg);

    char world[16], port[16], group[48], tmo[32];
    snprintf(world, sizeof world, "%d", j->world);
    snprintf(port, sizeof port, "%d", srv ? rs_store_server_port(srv) : 0);
    snprintf(group, sizeof group, "group=r%lld-%ld", (long long)j->run, (long)getpid());
    snprintf(tmo, sizeof tmo, "timeout=%g", timeout_s);
    const char *argv[64];
    int a = 0;
    if (be->needs_launcher) {
        argv[a++] = "mpirun";
        if (geteuid() == 0) argv[a++] = "--allow-run-as-root";
        argv[a++] = "--oversubscribe";
        argv[a++] = "-np";
        argv[a++] = world;
    }
    argv[a++] = exe;
    argv[a++] = "--worker";
    argv[a++] = j->what;
    argv[a++] = group;
    argv[a++] = tmo;
    argv[a++] = "store=launcher";
    for (int i = 0; i < nargs && a < 62; i++) argv[a++] = job_args[i];
    argv[a] = NULL;

    rs_launch_cfg cfg = {.nranks = be->needs_launcher ? 1 : j->world, .argv = argv,
                         .master_port = srv ? rs_store_server_port(srv) : 1, .grace_s = 2,
                         .on_line = on_line, .line_ud = j, .should_stop = stop_requested, .stop_ud = j};
    rs_launch *l = NULL;
    rs_launch_result res;
    rs_status st = rs_launch_start(&cfg, &l, &e);
    if (!st) st = rs_launch_wait(l, 0, &res, &e);
    rs_launch_free(l);
    rs_store_server_stop(srv);
    if (st == RS_ERR_CANCELLED) {
        rs_log_run_end(s, j->run, "cancelled", 0, NULL, "stopped by Ctrl-C");
        return rs_session_error(s, c, (size_t)-1, 0, "%s: stopped (Ctrl-C); the ranks were ended", j->what);
    }
    if (st) {
        rs_log_run_end(s, j->run, "failed", 0, NULL, e.msg);
        return rs_session_error(s, c, (size_t)-1, 0, "%s: %s", j->what, e.msg);
    }
    return 0;
}

/* The checks every rank-starting command shares: ranks, backend, algo (for step-based backends). */
static int common_opts(rs_session *s, const rs_call *c, dist_job *j, double *timeout_s)
{
    long long ranks = rs_call_int(c, "ranks", 2);
    const rs_optval *rv = rs_call_opt(c, "ranks");
    if (ranks < 1 || ranks > 64)
        return rs_session_error(s, c, rv->pos, 5 + strlen(rv->text ? rv->text : ""),
                                "%s: ranks must be 1..64 (this machine has %ld cores; more ranks share them), got %lld",
                                c->cmd->name, sysconf(_SC_NPROCESSORS_ONLN), ranks);
    j->world = (int)ranks;
    j->backend = rs_call_str(c, "backend", "shm");
    const rs_optval *bv = rs_call_opt(c, "backend");
    if (!rs_pg_backend_find(j->backend)) {
        rs_err e = {0};
        rs_pg *g = NULL;
        rs_pg_new(j->backend, NULL, "x", 0, 1, 1, &g, &e);
        return rs_session_error(s, c, bv->pos, 8 + strlen(j->backend), "%s: %s", c->cmd->name, e.msg);
    }
    const rs_optval *av = rs_call_opt(c, "algo");
    if (av && av->set && rs_pg_backend_find(j->backend)->ops->transport == NULL &&
        strcmp(rs_call_str(c, "algo", "auto"), "auto") != 0)
        return rs_session_error(s, c, av->pos, 5 + strlen(av->text),
                                "%s: backend %s chooses its own algorithms; algo= applies to shm and tcp",
                                c->cmd->name, j->backend);
    *timeout_s = rs_call_float(c, "timeout", 30);
    j->s = s;
    j->c = c;
    j->wrong = calloc((size_t)j->world, sizeof *j->wrong);
    j->seconds = calloc((size_t)j->world, sizeof *j->seconds);
    j->begin_t = calloc((size_t)j->world, sizeof *j->begin_t);
    j->checked = calloc((size_t)j->world, sizeof *j->checked);
    j->mono_to_unix = mono_to_unix();
    if (!j->wrong || !j->seconds || !j->begin_t || !j->checked)
        return rs_session_error(s, c, (size_t)-1, 0, "%s: out of memory", c->cmd->name);
    return 0;
}

/* OP as users write it: torch's names, and nccl-tests' / MPI's spellings. */
static int parse_op(rs_session *s, const rs_call *c, rs_pg_opkind *op)
{
    static const char *const alias[][2] = {{"allreduce", "all_reduce"}, {"allgather", "all_gather"},
                                           {"reducescatter", "reduce_scatter"}, {"alltoall", "all_to_all"},
                                           {"bcast", "broadcast"}};
    const char *w = c->args[0];
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcmp(w, alias[i][0])) w = alias[i][1];
    if (rs_pg_op_from_name(w, op) && *op != RS_OP_SEND && *op != RS_OP_RECV) return 0;
    static const char *const names[] = {"broadcast", "reduce", "all_reduce", "scatter", "gather", "all_gather",
                                        "reduce_scatter", "all_to_all", "barrier"};
    const char *near = rs_val_near_miss(c->args[0], names, 9);
    char hint[64] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    bool p2p = !strcmp(w, "send") || !strcmp(w, "recv");
    return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                            "%s: '%s' is not a collective%s; one of broadcast, reduce, all_reduce, scatter, gather, "
                            "all_gather, reduce_scatter, all_to_all, barrier%s",
                            c->cmd->name, c->args[0], hint, p2p ? " (send and recv: try `p2p`)" : "");
}

/* ---------------------------------------------------------------- collective */

int rs_cmd_collective(rs_session *s, const rs_call *c)
{
    dist_job j = {.what = "collective", .collect = true};
    double timeout = 30;
    rs_pg_opkind op;
    int rc = parse_op(s, c, &op);
    if (!rc) rc = common_opts(s, c, &j, &timeout);
    if (rc) {
        job_free(&j);
        return rc;
    }
    rs_dtype dt = RS_F32;
    const char *dts = rs_call_str(c, "dtype", "f32");
    for (int t = 0; t < RS_DTYPE_COUNT; t++)
        if (!strcmp(dts, rs_dtype_name((rs_dtype)t))) dt = (rs_dtype)t;
    long long count = rs_call_int(c, "count", 2);
    if (rs_call_given(c, "size") && !rs_call_given(c, "count"))
        count = (long long)(rs_call_opt(c, "size")->v.size / rs_dtype_size(dt));
    long long root = rs_call_int(c, "root", 0);
    if (count < 0 || count > (1ll << 31)) {
        const rs_optval *v = rs_call_given(c, "count") ? rs_call_opt(c, "count") : rs_call_opt(c, "size");
        job_free(&j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 6, "collective: %lld elements per rank is out of range "
                                "(0..2^31)", count);
    }
    if (root < 0 || root >= j.world) {
        const rs_optval *v = rs_call_opt(c, "root");
        job_free(&j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 5, "collective: root %lld is not a rank (0..%d)", root,
                                j.world - 1);
    }
    j.run = rs_log_run_begin_dist(s, "collective", NULL, NULL, NULL, c, "collective", j.backend, j.world);
    char a_op[48], a_cnt[48], a_dt[24], a_red[32], a_algo[48], a_root[24], a_show[24], a_be[32];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_cnt, sizeof a_cnt, "count=%lld", count);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", rs_dtype_name(dt));
    snprintf(a_red, sizeof a_red, "redop=%s", rs_call_str(c, "op", "sum"));
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_root, sizeof a_root, "root=%lld", root);
    snprintf(a_show, sizeof a_show, "show=%lld", rs_call_int(c, "show", 16));
    snprintf(a_be, sizeof a_be, "backend=%s", j.backend);
    const char *args[] = {a_be, a_op, a_cnt, a_dt, a_red, a_algo, a_root, a_show, "trace=1"};
    rc = run_ranks(&j, args, 9, timeout);
    print_lines(&j, "  ");
    if (!rc) {
        uint64_t wrong = 0;
        double slowest = 0;
        int missing = 0;
        for (int r = 0; r < j.world; r++) {
            wrong += j.wrong[r];
            if (j.seconds[r] > slowest) slowest = j.seconds[r];
            if (!j.checked[r]) missing++;
        }
        char when[32], algo[64] = "";
        if (slowest < 1e-3) snprintf(when, sizeof when, "%.1f us", slowest * 1e6);
        else snprintf(when, sizeof when, "%.3f ms", slowest * 1e3);
        if (j.steps)
            snprintf(algo, sizeof algo, ", %s%s%d step%s", strcmp(j.algo, "auto") ? j.algo : "",
                     strcmp(j.algo, "auto") ? " in " : "", j.steps, j.steps == 1 ? "" : "s");
        bool reduces = op == RS_OP_REDUCE || op == RS_OP_ALL_REDUCE || op == RS_OP_REDUCE_SCATTER;
        char red[32] = "";
        if (reduces) snprintf(red, sizeof red, " (%s)", rs_call_str(c, "op", "sum"));
        fprintf(s->out, "%s%s of %lld x %s on %d ranks, %s%s: %s (slowest rank)\n", rs_pg_op_name(op), red, count,
                rs_dtype_name(dt), j.world, j.backend, algo, when);
        if (missing || wrong) {
            for (int r = 0; r < j.world; r++)
                if (j.wrong[r]) fprintf(s->out, "  rank %d: %llu elements differ from the serial computation\n", r,
                                        (unsigned long long)j.wrong[r]);
            rc = rs_session_error(s, c, (size_t)-1, 0, "collective: %s", missing ? "some ranks did not report a result"
                                                                                  : "wrong results (see above)");
            rs_log_run_end(s, j.run, "failed", 1, NULL, s->last_error);
        } else {
            fprintf(s->out, "every rank's result equals the serial computation%s\n",
                    j.run > 0 ? "; trace in the session log" : "");
            char final[128];
            snprintf(final, sizeof final, "{\"seconds\":%.9g,\"events\":%lld}", slowest, (long long)j.nevents);
            rs_log_run_end(s, j.run, "done", 1, final, NULL);
        }
    }
    job_free(&j);
    return rc;
}

/* ---------------------------------------------------------------- bench */

int rs_cmd_bench(rs_session *s, const rs_call *c)
{
    dist_job j = {.what = "bench"};
    double timeout = 30;
    rs_pg_opkind op;
    int rc = parse_op(s, c, &op);
    if (!rc) rc = common_opts(s, c, &j, &timeout);
    if (rc) {
        job_free(&j);
        return rc;
    }
    uint64_t lo, hi;
    rs_err e = {0};
    const rs_optval *sv = rs_call_opt(c, "sizes");
    if (rs_val_size_range(rs_call_str(c, "sizes", "8..64M"), &lo, &hi, &e) || lo == 0 || hi > (1ull << 32)) {
        job_free(&j);
        return rs_session_error(s, c, sv->pos, strlen(sv->text) + 6, "bench: sizes: %s",
                                e.msg[0] ? e.msg : "give LO..HI between 1 and 4G, e.g. sizes=8..64M");
    }
    const char *dts = rs_call_str(c, "dtype", "f32");
    j.run = rs_log_run_begin_dist(s, "bench", NULL, NULL, NULL, c, "bench", j.backend, j.world);
    fprintf(s->out, "# bench %s: %d ranks, %s backend, %s, %s%s\n", rs_pg_op_name(op), j.world, j.backend, dts,
            rs_call_str(c, "op", "sum"), j.run > 0 ? "" : " (no session log)");
    char a_op[48], a_lo[48], a_hi[48], a_dt[24], a_red[32], a_algo[48], a_it[32], a_be[32];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_lo, sizeof a_lo, "minbytes=%llu", (unsigned long long)lo);
    snprintf(a_hi, sizeof a_hi, "maxbytes=%llu", (unsigned long long)hi);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", dts);
    snprintf(a_red, sizeof a_red, "redop=%s", rs_call_str(c, "op", "sum"));
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    snprintf(a_be, sizeof a_be, "backend=%s", j.backend);
    const char *args[] = {a_be, a_op, a_lo, a_hi, a_dt, a_red, a_algo, a_it};
    rc = run_ranks(&j, args, 8, timeout);
    if (!rc) {
        fprintf(s->out, "# Out of bounds values : %llu %s\n", (unsigned long long)j.wrong_rows,
                j.wrong_rows ? "WRONG" : "OK");
        fprintf(s->out, "# Avg bus bandwidth    : %.4f GB/s\n#\n", j.nrows ? j.busbw_sum / j.nrows : 0);
        char final[96];
        snprintf(final, sizeof final, "{\"avg_busbw\":%.6g,\"rows\":%d}", j.nrows ? j.busbw_sum / j.nrows : 0, j.nrows);
        rs_log_run_end(s, j.run, j.wrong_rows ? "failed" : "done", j.nrows, final,
                       j.wrong_rows ? "wrong results" : NULL);
        if (j.wrong_rows) rc = rs_session_error(s, c, (size_t)-1, 0, "bench: some sizes gave wrong results");
    }
    job_free(&j);
    return rc;
}

/* ---------------------------------------------------------------- p2p */

int rs_cmd_p2p(rs_session *s, const rs_call *c)
{
    dist_job j = {.what = "p2p", .collect = true};
    double timeout = 30;
    int rc = common_opts(s, c, &j, &timeout);
    if (!rc && j.world < 2) {
        const rs_optval *v = rs_call_opt(c, "ranks");
        rc = rs_session_error(s, c, v->pos, 5 + strlen(v->text), "p2p: needs 2 ranks or more");
    }
    if (rc) {
        job_free(&j);
        return rc;
    }
    uint64_t size = rs_call_opt(c, "size")->v.size;
    if (size < 4 || size > (1ull << 31)) {
        const rs_optval *v = rs_call_opt(c, "size");
        job_free(&j);
        return rs_session_error(s, c, v->pos, 5 + strlen(v->text), "p2p: size must be 4 bytes .. 2G");
    }
    j.run = rs_log_run_begin_dist(s, "p2p", NULL, NULL, NULL, c, "p2p", j.backend, j.world);
    char a_size[48], a_be[32], a_it[32];
    snprintf(a_size, sizeof a_size, "size=%llu", (unsigned long long)size);
    snprintf(a_be, sizeof a_be, "backend=%s", j.backend);
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    const char *args[] = {a_be, a_size, a_it};
    rc = run_ranks(&j, args, 3, timeout);
    print_lines(&j, "");
    if (!rc) {
        bool bad = j.wrong[0] || j.wrong[1] || !j.checked[0] || !j.checked[1];
        if (bad) rc = rs_session_error(s, c, (size_t)-1, 0, "p2p: the received data was not the peer's");
        rs_log_run_end(s, j.run, bad ? "failed" : "done", 1, NULL, bad ? "wrong data" : NULL);
    }
    job_free(&j);
    return rc;
}

/* ---------------------------------------------------------------- backends */

int rs_cmd_backends(rs_session *s, const rs_call *c)
{
    (void)c;
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
            bool have = fn[r] != NULL;
            fprintf(f, "   %s    %s  ", have && (o->devices & RS_PG_DEV_CPU) ? yes : no,
                    have && (o->devices & RS_PG_DEV_GPU) ? yes : no);
        }
        fputc('\n', f);
    }
    fputc('\n', f);
    for (int i = 0; i < nb; i++) fprintf(f, "  %-5s %s\n        %s\n", b[i].name, b[i].about, b[i].ops->algos);
    static const char *const all[] = {"shm", "tcp", "mpi", "nccl"};
    for (int i = 0; i < 4; i++)
        if (!rs_pg_backend_find(all[i]))
            fprintf(f, "  %-5s not built: meson did not find %s\n", all[i],
                    !strcmp(all[i], "mpi") ? "Open MPI (apt-get install libopenmpi-dev)" : "CUDA and NCCL");
    fprintf(f, "\nTry: collective all_reduce ranks=4 backend=shm algo=ring   bench all_reduce ranks=2 sizes=8..64M\n");
    return 0;
}
