/* Commands that start ranks — collective, bench, p2p — and `backends`. Each run spawns real rank
 * processes (`ringside --worker ...`, or under mpirun for backend=mpi), hosts their rendezvous store,
 * reads their output line by line (dist/worker/worker.h: human lines and '@' machine lines), stores
 * their trace events in the session log, and prints what they found. */
#define _GNU_SOURCE
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
        fprintf(s->out, "stopping run %lld (%s); its end will be printed here\n", id, j->what);
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
        fprintf(s->out, "  %-6lld %-11s %5d %8.1fs  %s%s\n", (long long)j->id, j->what, j->world, now - j->t_begin, what,
                j->stopping ? " (stopping)" : "");
    }
    return 0;
}

/* ---------------------------------------------------------------- collective */

/* The buffers the ranks sent (@vals), for `expect rank 0 = [2, 110]`. */
static void record_vals(rs_job *j)
{
    for (int i = 0; i < j->nvals; i++) {
        const rs_wire_vals *v = &j->vals[i];
        rs_result_vec(j->s, v->which, v->rank, v->v, v->n);
    }
}

/* What `expect` reads after a collective (docs/repl.md lists it). */
static void record_collective(rs_job *j, double slowest, uint64_t wrong)
{
    rs_session *s = j->s;
    record_vals(j);
    rs_result_main(s, "out");
    rs_result_num(s, "world", j->world);
    rs_result_num(s, "count", (double)j->count);
    rs_result_num(s, "bytes", (double)j->count * (double)rs_dtype_size(j->dt));
    rs_result_num(s, "steps", j->steps);
    rs_result_num(s, "time_us", slowest * 1e6);
    rs_result_num(s, "wrong", (double)wrong);
    for (int r = 0; r < j->world; r++) {
        rs_result_rank(s, "time_us", r, j->seconds[r] * 1e6);
        rs_result_rank(s, "sent_bytes", r, j->sent[r]);
    }
}

/* The job's end: the ranks' lines in rank order, the verdict, the run's end in the log. */
static int collective_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    rs_job_print_lines(j, "  ");
    if (rc) return rc;
    uint64_t wrong = 0;
    double slowest = 0;
    int missing = 0;
    for (int r = 0; r < j->world; r++) {
        wrong += j->wrong[r];
        if (j->seconds[r] > slowest) slowest = j->seconds[r];
        if (!j->checked[r]) missing++;
    }
    char when[32], algo[64] = "";
    if (slowest < 1e-3) snprintf(when, sizeof when, "%.1f us", slowest * 1e6);
    else snprintf(when, sizeof when, "%.3f ms", slowest * 1e3);
    if (j->steps)
        snprintf(algo, sizeof algo, ", %s%s%d step%s", strcmp(j->algo, "auto") ? j->algo : "",
                 strcmp(j->algo, "auto") ? " in " : "", j->steps, j->steps == 1 ? "" : "s");
    rs_pg_opkind op = j->op;
    bool reduces = op == RS_OP_REDUCE || op == RS_OP_ALL_REDUCE || op == RS_OP_REDUCE_SCATTER;
    char red[32] = "";
    if (reduces) snprintf(red, sizeof red, " (%s)", j->redop);
    fprintf(s->out, "%s%s of %lld x %s on %d ranks, %s%s: %s (slowest rank)\n", rs_pg_op_name(op), red, j->count,
            rs_dtype_name(j->dt), j->world, j->backend, algo, when);
    if (missing || wrong) {
        for (int r = 0; r < j->world; r++)
            if (j->wrong[r]) fprintf(s->out, "  rank %d: %llu elements differ from the serial computation\n", r,
                                     (unsigned long long)j->wrong[r]);
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "collective: %s", missing ? "some ranks did not report a result"
                                                                                : "wrong results (see above)");
        rs_log_run_end(s, j->run, "failed", 1, NULL, s->last_error);
    } else {
        fprintf(s->out, "every rank's result equals the serial computation%s\n",
                j->run > 0 ? "; trace in the session log" : "");
        if (!j->background) record_collective(j, slowest, wrong);
        char final[128];
        snprintf(final, sizeof final, "{\"seconds\":%.9g,\"events\":%lld}", slowest, (long long)j->nevents);
        rs_log_run_end(s, j->run, "done", 1, final, NULL);
    }
    return rc;
}


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
    double timeout = 30;
    rs_pg_opkind op;
    if (rs_job_parse_op(s, c, &op)) return 1;
    rs_job *j = rs_job_new(s, c, "collective", true, &timeout);
    if (!j) return 1;
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
    j->op = op;
    j->dt = dt;
    j->count = count;
    snprintf(j->redop, sizeof j->redop, "%s", rs_call_str(c, "op", "sum"));
    j->finish = collective_end;
    j->run = rs_log_run_begin_dist(s, "collective", NULL, NULL, NULL, c, "collective", j->backend, j->world);
    char a_op[48], a_cnt[48], a_dt[24], a_red[32], a_algo[48], a_root[24], a_show[24], a_be[48];
    snprintf(a_op, sizeof a_op, "op=%s", rs_pg_op_name(op));
    snprintf(a_cnt, sizeof a_cnt, "count=%lld", count);
    snprintf(a_dt, sizeof a_dt, "dtype=%s", rs_dtype_name(dt));
    snprintf(a_red, sizeof a_red, "redop=%s", j->redop);
    snprintf(a_algo, sizeof a_algo, "algo=%s", rs_call_str(c, "algo", "auto"));
    snprintf(a_root, sizeof a_root, "root=%lld", root);
    snprintf(a_show, sizeof a_show, "show=%lld", rs_call_int(c, "show", 16));
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be, a_op, a_cnt, a_dt, a_red, a_algo, a_root, a_show, "trace=1"};
    return rs_job_run(j, args, 9, timeout);
}

/* ---------------------------------------------------------------- bench */

/* The job's end: nccl-tests' footer and the run's end in the log. */
static int bench_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    if (rc) return rc;
    double avg = j->nrows ? j->busbw_sum / j->nrows : 0;
    fprintf(s->out, "# Out of bounds values : %llu %s\n", (unsigned long long)j->wrong_rows,
            j->wrong_rows ? "WRONG" : "OK");
    fprintf(s->out, "# Avg bus bandwidth    : %.4f GB/s\n#\n", avg);
    if (!j->background) {
        rs_result_num(s, "avg_busbw", avg);
        rs_result_num(s, "rows", j->nrows);
        rs_result_num(s, "wrong", (double)j->wrong_rows);
        rs_result_num(s, "world", j->world);
        rs_result_num(s, "bus_factor", rs_pg_bus_factor(j->op, j->world));
    }
    char final[96];
    snprintf(final, sizeof final, "{\"avg_busbw\":%.6g,\"rows\":%d}", avg, j->nrows);
    rs_log_run_end(s, j->run, j->wrong_rows ? "failed" : "done", j->nrows, final, j->wrong_rows ? "wrong results" : NULL);
    if (j->wrong_rows) rc = rs_session_error(s, j->c, (size_t)-1, 0, "bench: some sizes gave wrong results");
    return rc;
}

int rs_cmd_bench(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    double timeout = 30;
    rs_pg_opkind op;
    if (rs_job_parse_op(s, c, &op)) return 1;
    rs_job *j = rs_job_new(s, c, "bench", false, &timeout);
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
    j->op = op;
    j->finish = bench_end;
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
    return rs_job_run(j, args, 8, timeout);
}

/* ---------------------------------------------------------------- p2p */

static int p2p_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    rs_job_print_lines(j, "");
    if (rc) return rc;
    bool bad = j->wrong[0] || j->wrong[1] || !j->checked[0] || !j->checked[1];
    if (bad) rc = rs_session_error(s, j->c, (size_t)-1, 0, "p2p: the received data was not the peer's");
    if (!bad && !j->background) {
        record_vals(j);
        rs_result_main(s, "data");
        rs_result_num(s, "wrong", (double)(j->wrong[0] + j->wrong[1]));
        if (j->have_p2p) {
            const rs_p2p_times *t = &j->p2p;
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

int rs_cmd_p2p(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    double timeout = 30;
    rs_job *j = rs_job_new(s, c, "p2p", true, &timeout);
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
    j->finish = p2p_end;
    j->run = rs_log_run_begin_dist(s, "p2p", NULL, NULL, NULL, c, "p2p", j->backend, j->world);
    char a_size[48], a_be[48], a_it[32];
    snprintf(a_size, sizeof a_size, "size=%llu", (unsigned long long)size);
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    snprintf(a_it, sizeof a_it, "iters=%lld", rs_call_int(c, "iters", 0));
    const char *args[] = {a_be, a_size, a_it};
    return rs_job_run(j, args, 3, timeout);
}

/* ---------------------------------------------------------------- world */

/* The job's end: who each rank is, in rank order, what that makes, and how to start the same by hand. */
static int world_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    rs_job_print_lines(j, "  ");
    if (rc) return rc;
    int per = j->per_node ? j->per_node : j->world, nodes = j->world / per;
    bool mpi = rs_pg_backend_find(j->backend)->needs_launcher;
    fprintf(s->out, "world size %d: ranks 0..%d, %d node%s of %d (local ranks 0..%d), %s backend\n", j->world,
            j->world - 1, nodes, nodes == 1 ? "" : "s", per, per - 1, j->backend);
    if (mpi) fprintf(s->out, "mpirun started them and wired them up\n");
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
    for (int i = 0; i < j->nnums; i++) rs_result_rank(s, j->nums[i].name, j->nums[i].rank, j->nums[i].v);
    return rc;
}

int rs_cmd_world(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    double timeout = 30;
    rs_job *j = rs_job_new(s, c, "world", true, &timeout);
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
    j->finish = world_end;
    j->run = rs_log_run_begin_dist(s, "world", NULL, NULL, NULL, c, "world", j->backend, j->world);
    char a_be[48];
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    const char *args[] = {a_be};
    return rs_job_run(j, args, 1, timeout);
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

