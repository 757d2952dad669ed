/* How mode=pipeline cuts a model into stages (partition=uniform|parameters|time; dist/train/pipe_layout.c,
 * pipe_split.c), against a brute force over every way to cut the top-level items into S contiguous
 * stages:
 *  - partition=parameters: the largest stage's parameter count is the least any cut gives;
 *  - partition=uniform: the largest stage's item count is the least any cut gives (S stages of
 *    ceil(n/S) items at most);
 *  - the time cut, with injected per-item times (what the profile would measure): the largest stage's
 *    time is the least any cut gives, and on a model whose first layer outweighs the rest it is below
 *    the uniform cut's largest stage's time under the same times;
 *  - the profile itself (rs_pipe_item_times) on that model: the 784x1024 linear takes longer than a
 *    32x32 one (six hundred times the work: an ordering a loaded machine keeps), and the model's
 *    gradients and step are left as they were.
 * Usage: test-pipe-partition */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/train/pipe_layout.h"
#include "dist/train/pipe_split.h"
#include "engine/nn/spec.h"
#include "tests/rs_test.h"

/* The least largest-stage cost over all cuts of n items into S contiguous non-empty stages. */
static double brute(const double *cost, int n, int S, int first)
{
    if (S == 1) {
        double c = 0;
        for (int i = first; i < n; i++) c += cost[i];
        return c;
    }
    double best = INFINITY, head = 0;
    for (int end = first + 1; end <= n - (S - 1); end++) {
        head += cost[end - 1];
        double rest = brute(cost, n, S - 1, end), v = head > rest ? head : rest;
        if (v < best) best = v;
    }
    return best;
}

/* The largest stage's cost under cuts (layer indices) for items of cost cost. */
static double largest(const rs_model *m, const int *cuts, int S, const double *cost)
{
    rs_top_item it[64];
    int n = rs_model_top_items(m, it, 64);
    double most = 0;
    for (int s = 0; s < S; s++) {
        double c = 0;
        for (int i = 0; i < n; i++)
            if (it[i].first >= cuts[s] && it[i].first < cuts[s + 1]) c += cost[i];
        if (c > most) most = c;
    }
    return most;
}

static rs_status cut_with(const rs_model *m, const char *part, int S, int *cuts)
{
    rs_strategy_args a;
    rs_err e = {0};
    rs_strategy_args_init(&a, &rs_strategy_pipeline);
    if (rs_strategy_args_set(&a, "partition", part, &e)) {
        RS_CHECK(0, "partition=%s refused: %s", part, e.msg);
        return RS_ERR_ARG;
    }
    rs_status st = rs_pipe_cuts_for(&a, m, S, NULL, cuts, &e);
    RS_CHECK(st == RS_OK, "partition=%s into %d stages: %s", part, S, e.msg);
    return st;
}

static void check_model(const char *spec)
{
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    rs_top_item it[64];
    int n = rs_model_top_items(m, it, 64);
    double params[64], ones[64], times[64];
    for (int i = 0; i < n; i++) {
        params[i] = (double)it[i].params;
        ones[i] = 1;
        times[i] = 1e-3 * (1 + (i * 7919) % 13); /* a profile that is neither of the others */
    }
    for (int S = 2; S <= 4 && S <= n; S++) {
        int cuts[8];
        if (!cut_with(m, "parameters", S, cuts)) {
            double got = largest(m, cuts, S, params), want = brute(params, n, S, 0);
            RS_CHECK(got == want, "%s, %d stages by parameters: largest stage %.0f, the best cut's %.0f", spec, S, got,
                     want);
        }
        if (!cut_with(m, "uniform", S, cuts)) {
            double got = largest(m, cuts, S, ones);
            RS_CHECK(got == ceil((double)n / S), "%s, %d stages uniform: largest stage %.0f items of %d", spec, S, got,
                     n);
        }
        RS_CHECK(rs_pipe_split_balance(m, times, S, cuts, &e) == RS_OK, "balance by time: %s", e.msg);
        double got = largest(m, cuts, S, times), want = brute(times, n, S, 0);
        RS_CHECK(fabs(got - want) < 1e-12, "%s, %d stages by injected times: largest %.4f, the best cut's %.4f", spec, S,
                 got, want);
    }
    rs_model_free(m);
}

/* A model whose first linear outweighs the rest: the time cut beats the uniform one under the same
 * times, and the profile orders the big linear above a small one. */
static void check_unbalanced(void)
{
    const char *spec = "mlp 784-1024-32-32-32-32-10";
    rs_model *m = NULL;
    rs_err e = {0};
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (!m) return;
    double t[64];
    int n = 0;
    float *g = rs_model_grads(m);
    size_t P = rs_model_numel(m);
    for (size_t i = 0; i < P; i++) g[i] = (float)(i % 7);
    uint64_t step = rs_model_step(m);
    RS_CHECK(rs_pipe_item_times(m, 64, t, 64, &n, &e) == RS_OK, "profile: %s", e.msg);
    bool kept = rs_model_step(m) == step;
    for (size_t i = 0; i < P && kept; i++) kept = g[i] == (float)(i % 7);
    RS_CHECK(kept, "the profile leaves the model's gradients and step as they were");
    rs_top_item it[64];
    RS_CHECK(n == rs_model_top_items(m, it, 64) && n >= 4, "one time per top-level item (%d)", n);
    /* item 0 is linear 784x1024, item 4 linear 32x32 (items alternate linear and activation) */
    RS_CHECK(t[0] > t[4] && t[4] >= 0, "the 784x1024 linear (%.3g s) takes longer than a 32x32 one (%.3g s)", t[0], t[4]);
    for (int S = 2; S <= 3; S++) {
        int uni[8], tim[8];
        if (cut_with(m, "uniform", S, uni)) continue;
        RS_CHECK(rs_pipe_split_balance(m, t, S, tim, &e) == RS_OK, "balance: %s", e.msg);
        double lu = largest(m, uni, S, t), lt = largest(m, tim, S, t);
        RS_CHECK(lt <= lu, "%d stages: the time cut's slowest stage (%.3g s) is no slower than uniform's (%.3g s)", S,
                 lt, lu);
        char a[64], b[64];
        rs_pipe_split_text(tim, S, a, sizeof a);
        rs_pipe_split_text(uni, S, b, sizeof b);
        printf("%d stages: time cut %s (slowest %.3g ms), uniform %s (slowest %.3g ms)\n", S, a, 1e3 * lt, b, 1e3 * lu);
    }
    rs_model_free(m);
}

int main(void)
{
    check_model("mlp 784-256-256-256-256-256-256-10");
    check_model("mlp 784-1024-32-32-32-32-10");
    check_model("mlp 100-50-400-20-300-10 act=gelu");
    check_unbalanced();
    return rs_test_finish("pipe-partition");
}
