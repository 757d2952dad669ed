/* Pipeline stage cuts (see pipe_split.h). */
#include "pipe_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/train/train.h"

static void legal_cuts(const rs_model *m, char *buf, size_t cap)
{
    int at[256], n = rs_model_cut_points(m, at, 256);
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && i < 256 && k + 8 < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? "," : "", at[i]);
    if (n > 256 && k + 8 < cap) snprintf(buf + k, cap - k, ",...");
}

rs_status rs_pipe_split_parse(const rs_model *m, const char *text, int S, int *cuts, rs_err *err)
{
    int n = rs_model_layer_count(m), k = 1;
    char legal[512];
    cuts[0] = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) {
            legal_cuts(m, legal, sizeof legal);
            return rs_err_set(err, RS_ERR_ARG,
                              "split=%s: expected layer indices separated by commas, where stages begin (e.g. "
                              "split=%s)", text, legal[0] ? legal : "3");
        }
        if (k >= S) return rs_err_set(err, RS_ERR_ARG, "split=%s cuts the model into more than the %d stages", text, S);
        if (v <= cuts[k - 1] || v >= n || !rs_model_cut_ok(m, (int)v)) {
            legal_cuts(m, legal, sizeof legal);
            return rs_err_set(err, RS_ERR_ARG,
                              "split=%s: a stage cannot begin at layer %ld (%s); the model's %d layers can be cut "
                              "before layers %s, in increasing order",
                              text, v, v <= cuts[k - 1] ? "not after the previous cut" : v >= n ? "past the last layer"
                                                                                   : "inside a block, or a value "
                                                                                     "crosses it",
                              n, legal);
        }
        cuts[k++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (k != S)
        return rs_err_set(err, RS_ERR_ARG, "split=%s gives %d stages; %d stages need %d cuts", text, k, S, S - 1);
    cuts[S] = n;
    return RS_OK;
}

int rs_pipe_item_params(const rs_model *m, double *cost, int max)
{
    rs_top_item it[512];
    int n = rs_model_top_items(m, it, 512);
    for (int i = 0; i < n && i < max && i < 512; i++) cost[i] = (double)it[i].params;
    return n;
}

rs_status rs_pipe_split_balance(const rs_model *m, const double *cost, int S, int *cuts, rs_err *err)
{
    return rs_pipe_split_balance_where(m, cost, S, NULL, cuts, err);
}

rs_status rs_pipe_split_balance_where(const rs_model *m, const double *cost, int S, const bool *ok, int *cuts,
                                      rs_err *err)
{
    rs_top_item it[512];
    int n = rs_model_top_items(m, it, 512);
    if (n > 512) return rs_err_set(err, RS_ERR_ARG, "pipeline: the model has %d top-level items; at most 512", n);
    if (n < S)
        return rs_err_set(err, RS_ERR_ARG,
                          "pipeline: the model has %d top-level items (blocks stay whole), fewer than the %d stages; "
                          "use fewer ranks (or virtual stages), or split= by hand inside the items",
                          n, S);
    /* best[s][j]: the smallest largest-stage cost of the first j items in s stages; the linear
     * partition problem, small enough for the O(S n^2) table */
    double *pre = calloc((size_t)n + 1, sizeof *pre), *best = malloc(sizeof *best * (size_t)(S + 1) * (size_t)(n + 1));
    int *from = malloc(sizeof *from * (size_t)(S + 1) * (size_t)(n + 1));
    if (!pre || !best || !from) {
        free(pre), free(best), free(from);
        return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    }
    for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + cost[i];
#define BEST(s, j) best[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
#define FROM(s, j) from[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
    for (int j = 0; j <= n; j++) BEST(1, j) = j ? pre[j] : -1;
    for (int s = 2; s <= S; s++)
        for (int j = 0; j <= n; j++) {
            BEST(s, j) = -1;
            for (int i = s - 1; i < j; i++) {
                if (ok && !ok[it[i].first]) continue; /* no cut before item i */
                double c = BEST(s - 1, i), last = pre[j] - pre[i], v = c > last ? c : last;
                if (c >= 0 && (BEST(s, j) < 0 || v < BEST(s, j))) {
                    BEST(s, j) = v;
                    FROM(s, j) = i;
                }
            }
        }
    if (BEST(S, n) < 0) {
        free(pre), free(best), free(from);
        return rs_err_set(err, RS_ERR_ARG,
                          "pipeline: the model cannot be cut into %d stages between the items where a cut may go "
                          "(a tensor-parallel pair stays in one stage); use fewer stages or split= by hand", S);
    }
    int j = n;
    cuts[S] = rs_model_layer_count(m);
    for (int s = S; s >= 2; s--) {
        j = FROM(s, j);
        cuts[s - 1] = it[j].first;
    }
    cuts[0] = 0;
#undef BEST
#undef FROM
    free(pre);
    free(best);
    free(from);
    return RS_OK;
}

typedef struct timing {
    const rs_model *m;
    double t0, *cost;
    int n;
    int *item_of;      /* unit index -> top item */
} timing;

/* CPU seconds of the process, not the wall clock: on a machine whose cores other programs share, a
 * layer of a few milliseconds is interrupted in every pass, and the wall clock would cut the stages
 * by whom the scheduler happened to interrupt (2 ranks beside a load of 14 moved the cut of five
 * equal layers between 3|2 and 1|4 from run to run). The profile runs before any rank trains, so the
 * process's CPU time is the layers' own (with threads>1, their threads' too). */
static double tnow(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) return rs_train_now();
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static rs_status h_begin(void *ud, const rs_unit *u, rs_err *err)
{
    (void)u, (void)err;
    ((timing *)ud)->t0 = tnow();
    return RS_OK;
}

static rs_status h_end(void *ud, const rs_unit *u, rs_err *err)
{
    timing *t = ud;
    (void)err;
    int i = t->item_of[u->index];
    if (i >= 0 && i < t->n) t->cost[i] += tnow() - t->t0;
    return RS_OK;
}

rs_status rs_pipe_item_times(rs_model *m, int B, double *cost, int max, int *n_out, rs_err *err)
{
    rs_top_item it[512];
    int n = rs_model_top_items(m, it, 512), nu = rs_model_unit_count(m);
    if (n > max || n > 512) return rs_err_set(err, RS_ERR_ARG, "pipeline: too many top-level items (%d)", n);
    size_t per = (size_t)rs_shape_numel(rs_model_input_shape(m)), R = (size_t)rs_model_rows(m), P = rs_model_numel(m);
    float *x = calloc((size_t)B * per, sizeof *x), *keep = malloc(P * sizeof *keep);
    int32_t *y = calloc((size_t)B * R, sizeof *y);
    int *item_of = malloc(sizeof *item_of * (size_t)(nu ? nu : 1));
    double *once = calloc((size_t)n, sizeof *once);
    rs_acts *a = rs_acts_new(m, B, err);
    rs_status st = RS_OK;
    if (!x || !keep || !y || !item_of || !once || !a) {
        st = a ? rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory to time the stages") : (err ? err->code : RS_ERR_NOMEM);
        goto out;
    }
    for (int u = 0; u < nu; u++) {
        item_of[u] = -1;
        for (int i = 0; i < n; i++)
            if (rs_model_unit(m, u)->first == it[i].first) item_of[u] = i;
    }
    memcpy(keep, rs_model_grads(m), P * sizeof *keep);
    uint64_t step = rs_model_step(m);
    timing t = {.m = m, .cost = once, .n = n, .item_of = item_of};
    rs_unit_hooks h = {.before_forward = h_begin, .after_forward = h_end, .before_backward = h_begin,
                       .after_backward = h_end, .ud = &t};
    rs_model_set_unit_hooks(m, &h);
    for (int i = 0; i < n; i++) cost[i] = -1;
    /* the fastest of a few passes: the first warms caches, the machine may be busy */
    for (int rep = 0; rep < 4 && !st; rep++) {
        memset(once, 0, sizeof *once * (size_t)n);
        const float *out;
        float loss;
        st = rs_model_forward_acts(m, a, x, B, &out, err);
        if (!st) st = rs_model_loss_acts(m, a, y, B, &loss, err);
        if (!st) rs_model_backward_acts(m, a, x, y, B, 1.0f);
        for (int i = 0; i < n && !st; i++)
            if (cost[i] < 0 || once[i] < cost[i]) cost[i] = once[i];
    }
    rs_model_set_unit_hooks(m, NULL);
    memcpy(rs_model_grads(m), keep, P * sizeof *keep);
    rs_model_set_step(m, step);
    *n_out = n;
out:
    rs_acts_free(a);
    free(x);
    free(keep);
    free(y);
    free(item_of);
    free(once);
    return st;
}

void rs_pipe_split_text(const int *cuts, int S, char *buf, size_t cap)
{
    size_t k = 0;
    if (cap) buf[0] = 0;
    for (int s = 0; s < S && k + 16 < cap; s++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d..%d", s ? " | " : "", cuts[s], cuts[s + 1] - 1);
}
