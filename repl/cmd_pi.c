/* `pi`: the lecture's annex program on real ranks. Each rank sums every W-th term of a series for pi
 * (dist/worker/pi.h), a reduce adds the shares on rank 0, and the REPL prints pi, its error and the
 * same sum computed here in one process, for `expect`. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "call.h"
#include "dist/worker/pi.h"
#include "ranks_job.h"
#include "repl_log.h"
#include "result.h"
#include "session.h"

static const char *method_of(const rs_call *c) { return rs_call_str(c, "method", "series"); }

/* pi's own state (j->state): the terms and method (dist/worker/pi.h), for the end's serial check, and
 * the ranks' named numbers (@num: pi on rank 0, each rank's compute_us and reduce_us). */
typedef struct pi_job {
    uint64_t n;
    char method[16];
    rs_job_nums nums;
} pi_job;

static bool pi_line(rs_job *j, const char *line)
{
    pi_job *p = j->state;
    return rs_job_nums_line(&p->nums, j->world, line);
}

static void pi_free(rs_job *j)
{
    pi_job *p = j->state;
    rs_job_nums_free(&p->nums);
}

static int pi_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    pi_job *p = j->state;
    rs_job_print_lines(j, "  ");
    if (rc) return rc;
    double pi = NAN, compute = 0, reduce = 0;
    for (int i = 0; i < p->nums.n; i++) {
        const rs_job_num *k = &p->nums.v[i];
        if (!strcmp(k->name, "pi") && k->rank == 0) pi = k->v;
        if (!strcmp(k->name, "compute_us") && k->v > compute) compute = k->v;
        if (!strcmp(k->name, "reduce_us") && k->v > reduce) reduce = k->v;
    }
    rs_pi_method m = RS_PI_SERIES;
    rs_pi_method_parse(p->method, &m);
    double serial = rs_pi_partial(m, p->n, 0, 1, NULL), err = fabs(pi - M_PI);
    fprintf(s->out, "pi = %.15f: %llu term%s (%s) on %d ranks, summed on rank 0\n", pi,
            (unsigned long long)p->n, p->n == 1 ? "" : "s", p->method, j->world);
    fprintf(s->out, "error %.3e against pi; the same sum in one process differs by %.1e\n", err, fabs(pi - serial));
    fprintf(s->out, "slowest rank: %.1f us computing, %.1f us in the reduce\n", compute, reduce);
    rs_log_run_end(s, j->run, "done", 1, NULL, NULL);
    if (j->background) return rc;
    rs_result_num(s, "pi", pi);
    rs_result_num(s, "error", err);
    rs_result_num(s, "serial", serial);
    rs_result_num(s, "n", (double)p->n);
    rs_result_num(s, "world", j->world);
    rs_result_num(s, "compute_us", compute);
    rs_result_num(s, "reduce_us", reduce);
    for (int i = 0; i < p->nums.n; i++)
        if (strcmp(p->nums.v[i].name, "pi")) rs_result_rank(s, p->nums.v[i].name, p->nums.v[i].rank, p->nums.v[i].v);
    return rc;
}

static const rs_job_kind pi_kind = {
    .what = "pi", .state_size = sizeof(pi_job), .collect = true, .line = pi_line, .finish = pi_end,
    .free = pi_free,
};

int rs_cmd_pi(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_job *j = rs_job_new(s, c, &pi_kind);
    if (!j) return 1;
    pi_job *p = j->state;
    long long n = rs_call_given(c, "n") ? rs_call_int(c, "n", 0) : j->world; /* the annex: one term per rank */
    if (n < 1 || n > 10000000000LL) {
        const rs_optval *v = rs_call_opt(c, "n");
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, 2 + strlen(v->text), "pi: n (terms) must be 1 .. 1e10");
    }
    p->n = (uint64_t)n;
    snprintf(p->method, sizeof p->method, "%s", method_of(c));
    j->run = rs_log_run_begin_dist(s, "pi", NULL, NULL, NULL, c, "pi", j->backend, j->world);
    char a_be[48], a_n[48], a_m[48];
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    snprintf(a_n, sizeof a_n, "count=%llu", (unsigned long long)n);
    snprintf(a_m, sizeof a_m, "method=%s", p->method);
    const char *args[] = {a_be, a_n, a_m};
    return rs_job_run(j, args, 3);
}
