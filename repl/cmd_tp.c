/* `tp matmul`: the lecture's worked example of tensor parallelism (seed 001, 3.2.3) on real ranks.
 * The ranks (the worker's `matmul` job, dist/worker/matmul_job.c) each compute their part of A . B,
 * split by B's columns (an all_gather puts the blocks side by side) and by the inner dimension (an
 * all_reduce adds the partial products), print it and check the result against the serial product;
 * this command prints A, B and their product, every rank's line in rank order and the verdict. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "dist/worker/worker.h"
#include "ranks_job.h"
#include "repl_log.h"
#include "session.h"

/* The matmul's state (j->state) is each rank's verdict on its Y (@check). */
static bool tp_init(rs_job *j) { return rs_job_checks_init(j->state, j->world); }
static bool tp_line(rs_job *j, const char *line) { return rs_job_checks_line(j->state, j->world, line); }
static void tp_free(rs_job *j) { rs_job_checks_free(j->state); }

static int tp_matmul_end(rs_job *j, int rc)
{
    rs_session *s = j->s;
    rs_job_print_lines(j, "  ");
    if (rc) return rc;
    uint64_t wrong;
    double slowest;
    int missing;
    rs_job_checks_sum(j->state, j->world, &wrong, &slowest, &missing);
    if (missing || wrong) {
        rc = rs_session_error(s, j->c, (size_t)-1, 0, "tp matmul: %s",
                              missing ? "some ranks did not report a result" : "a rank's Y differs from A . B");
        rs_log_run_end(s, j->run, "failed", 1, NULL, s->last_error);
        return rc;
    }
    fprintf(s->out, "every rank's Y equals the serial A . B%s\n", j->run > 0 ? "; trace in the session log" : "");
    rs_log_run_end(s, j->run, "done", 1, NULL, NULL);
    return 0;
}

static const rs_job_kind matmul_kind = {
    .what = "matmul", .state_size = sizeof(rs_job_checks), .collect = true, .init = tp_init,
    .line = tp_line, .finish = tp_matmul_end, .free = tp_free,
};

/* A, B and their product, computed here, before the ranks print their parts of it. */
static void print_problem(FILE *f, int m, int k, int n)
{
    float *a = malloc(sizeof *a * (size_t)(m * k)), *b = malloc(sizeof *b * (size_t)(k * n)),
          *y = calloc((size_t)(m * n), sizeof *y);
    if (a && b && y) {
        rs_matmul_demo_fill(a, b, m, k, n);
        for (int i = 0; i < m; i++)
            for (int c = 0; c < n; c++)
                for (int p = 0; p < k; p++) y[i * n + c] += a[i * k + p] * b[p * n + c];
        fprintf(f, "A (%dx%d) = ", m, k);
        rs_matmul_demo_print(f, a, m, k, k);
        fprintf(f, "\nB (%dx%d) = ", k, n);
        rs_matmul_demo_print(f, b, k, n, n);
        fputs("\nserially, Y = A . B = ", f);
        rs_matmul_demo_print(f, y, m, n, n);
        fputc('\n', f);
    }
    free(a);
    free(b);
    free(y);
}

/* Refuses a split the ranks cannot share evenly, pointing at the option to change. */
static int refuse(rs_session *s, const rs_call *c, const char *opt, int size, int world, const char *what)
{
    const rs_optval *v = rs_call_given(c, opt) ? rs_call_opt(c, opt) : rs_call_opt(c, "ranks");
    size_t pos = v && v->set ? v->pos : (size_t)-1, len = v && v->set ? strlen(v->text) + 2 : 0;
    return rs_session_error(s, c, pos, len, "tp matmul: %d ranks cannot split %s (%s=%d) evenly; use %s=%d, or ranks "
                            "that divide %d", world, what, opt, size, opt, (size + world - 1) / world * world, size);
}

int rs_cmd_tp(rs_session *s, const rs_call *c)
{
    if (strcmp(c->args[0], "matmul"))
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "tp: '%s' is not a demo; `tp matmul` splits "
                                "the lecture's product over ranks (a split MLP or GPT trains with `train MODEL on DATA "
                                "mode=tensor`)", c->args[0]);
    rs_job *j = rs_job_new(s, c, &matmul_kind);
    if (!j) return 1;
    int m = (int)rs_call_int(c, "m", 2), k = (int)rs_call_int(c, "k", 4), n = (int)rs_call_int(c, "n", 2);
    const char *split = rs_call_str(c, "split", "both");
    static const char *const dims[] = {"m", "k", "n"};
    int val[3] = {m, k, n};
    for (int i = 0; i < 3; i++)
        if (val[i] < 1 || val[i] > 64) {
            const rs_optval *v = rs_call_opt(c, dims[i]);
            rs_job_free(j);
            return rs_session_error(s, c, v->pos, strlen(v->text) + 2, "tp matmul: %s=%d is out of range; the "
                                    "matrices' sizes are 1..64", dims[i], val[i]);
        }
    int world = j->world;
    if (!strcmp(j->backend, "nccl")) {
        const rs_optval *v = rs_call_opt(c, "backend");
        rs_job_free(j);
        return rs_session_error(s, c, v->pos, strlen(v->text) + 8, "tp matmul: the matrices live in host memory; use "
                                "backend=shm, tcp or mpi");
    }
    bool cols = strcmp(split, "rows") != 0, rows = strcmp(split, "cols") != 0;
    if ((cols && n % world) || (rows && k % world)) {
        rs_job_free(j);
        return cols && n % world ? refuse(s, c, "n", n, world, "B's columns")
                                 : refuse(s, c, "k", k, world, "the inner dimension (A's columns, B's rows)");
    }
    print_problem(s->out, m, k, n);
    j->run = rs_log_run_begin_dist(s, "matmul", NULL, NULL, NULL, c, "tensor", j->backend, j->world);
    char a_be[48], a_split[24], a_m[16], a_k[16], a_n[16];
    snprintf(a_be, sizeof a_be, "backend=%s", j->backend);
    snprintf(a_split, sizeof a_split, "split=%s", split);
    snprintf(a_m, sizeof a_m, "m=%d", m);
    snprintf(a_k, sizeof a_k, "k=%d", k);
    snprintf(a_n, sizeof a_n, "n=%d", n);
    const char *args[] = {a_be, a_split, a_m, a_k, a_n, "trace=1"};
    return rs_job_run(j, args, 6);
}
