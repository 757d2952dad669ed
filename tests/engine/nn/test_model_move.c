/* Models on a device (engine/nn/model.h: rs_model_to, rs_model_params_map/unmap, rs_model_grads_sumsq),
 * checked on the guard table (engine/guard/guard.h: the CPU's kernels on memory sealed between calls,
 * so a host read of the moved buffers faults):
 *  (a) a GPT and a CNN moved to the guard give the CPU model's outputs, loss and gradient norm bit for
 *      bit at one thread, for two batch sizes (the staging buffers made again for the larger one);
 *  (b) rs_model_params_map gives the CPU's weights; a value written through it with write_back comes
 *      back from the next map and changes the next forward; to the CPU and back keeps every weight;
 *  (c) the tracker: the parameter and gradient pools hold rs_model_buf_bytes after every move, for a
 *      model without parameters too (one float), and nothing else stays counted;
 *  (d) a range of layers on the guard is refused, and a move to where the model is does nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "engine/nn/spec.h"
#include "rs_test.h"

#define GPT "gpt layers=1 heads=2 dim=16 ctx=8 vocab=11"
#define CNN "seq in=1x8x8 conv(4,3,pad=1) relu res[ conv(4,3,pad=1) relu ] maxpool(2) flatten layernorm linear(5)"

static const rs_device GUARD = {RS_DEV_GUARD, 0};

static rs_model *build(const char *spec, uint64_t seed)
{
    rs_model *m = NULL;
    rs_err err = {0};
    size_t pos = 0;
    RS_CHECK(rs_model_parse(spec, "m", rs_device_cpu(), NULL, seed, &m, &pos, &err) == RS_OK, "%s: %s", spec, err.msg);
    if (m) rs_model_set_threads(m, 1);
    return m;
}

static void make_batch(const rs_model *m, int B, uint64_t seed, void *x, int32_t *y)
{
    rs_rng r;
    rs_rng_seed(&r, seed);
    size_t n = (size_t)B * (size_t)rs_shape_numel(rs_model_input_shape(m));
    int V = rs_model_vocab(m);
    for (size_t i = 0; i < n; i++) {
        if (V) ((int32_t *)x)[i] = (int32_t)rs_rng_below(&r, (uint64_t)V);
        else ((float *)x)[i] = rs_rng_range(&r, -1.0f, 1.0f);
    }
    for (int i = 0; i < B * rs_model_rows(m); i++) y[i] = (int32_t)rs_rng_below(&r, (uint64_t)rs_model_classes(m));
}

/* One training pass of batch B: *out gets a copy of the output, *loss the loss, *sq the gradient norm^2. */
static void pass(rs_model *m, int B, uint64_t seed, float *out, float *loss, double *sq)
{
    size_t in = (size_t)B * (size_t)rs_shape_numel(rs_model_input_shape(m));
    size_t R = (size_t)B * (size_t)rs_model_rows(m), on = R * (size_t)rs_model_classes(m);
    float *x = malloc(in * 4);
    int32_t *y = malloc(R * sizeof *y);
    make_batch(m, B, seed, x, y);
    rs_err err = {0};
    const float *o = NULL;
    rs_model_zero_grad(m);
    RS_CHECK(rs_model_forward(m, x, B, &o, &err) == RS_OK, "forward: %s", err.msg);
    if (o) memcpy(out, o, on * sizeof *out);
    RS_CHECK(rs_model_loss(m, y, B, loss, &err) == RS_OK, "loss: %s", err.msg);
    rs_model_backward(m, x, y, B, 1.0f);
    RS_CHECK(rs_model_grads_sumsq(m, sq, &err) == RS_OK, "grads_sumsq: %s", err.msg);
    RS_CHECK(rs_kctx_check(rs_model_ctx(m), &err) == RS_OK, "backward: %s", err.msg);
    free(x);
    free(y);
}

static void same_pass(const char *spec)
{
    rs_model *c = build(spec, 7), *g = build(spec, 7);
    rs_err err = {0};
    RS_CHECK(rs_model_to(g, GUARD, &err) == RS_OK, "%s: to guard: %s", spec, err.msg);
    rs_model_set_threads(g, 1);
    RS_CHECK(rs_model_device(g).kind == RS_DEV_GUARD, "%s: on the guard", spec);
    for (int B = 2; B <= 5; B += 3) {
        size_t on = (size_t)B * (size_t)rs_model_rows(c) * (size_t)rs_model_classes(c);
        float *oc = calloc(on, sizeof *oc), *og = calloc(on, sizeof *og), lc = 0, lg = -1;
        double sc = 0, sg = -1;
        pass(c, B, 100 + (uint64_t)B, oc, &lc, &sc);
        pass(g, B, 100 + (uint64_t)B, og, &lg, &sg);
        RS_CHECK(!memcmp(oc, og, on * sizeof *oc), "%s B=%d: the guard's output is the CPU's", spec, B);
        RS_CHECK(lc == lg, "%s B=%d: loss %.9g on the guard, %.9g on the CPU", spec, B, (double)lg, (double)lc);
        RS_CHECK(sc == sg && sc > 0, "%s B=%d: gradient norm^2 %.17g on the guard, %.17g on the CPU", spec, B, sg, sc);
        free(oc);
        free(og);
    }
    rs_model_free(c);
    rs_model_free(g);
}

static void params_round_trip(void)
{
    rs_model *c = build(CNN, 3), *g = build(CNN, 3);
    rs_err err = {0};
    size_t n = rs_model_numel(c);
    RS_CHECK(rs_model_to(g, GUARD, &err) == RS_OK, "to guard: %s", err.msg);
    float *h = rs_model_params_map(g, &err);
    RS_CHECK(h && h != rs_model_params(g), "map gives a host copy of a guard model: %s", err.msg);
    if (!h) return;
    RS_CHECK(!memcmp(h, rs_model_params(c), n * sizeof *h), "the mapped weights are the CPU model's");
    h[0] += 0.5f;
    RS_CHECK(rs_model_params_unmap(g, h, true, &err) == RS_OK, "unmap with write_back: %s", err.msg);
    float *h2 = rs_model_params_map(g, &err);
    RS_CHECK(h2 && h2[0] == rs_model_params(c)[0] + 0.5f, "the value written back is read again");
    if (h2) RS_CHECK(rs_model_params_unmap(g, h2, false, &err) == RS_OK, "unmap: %s", err.msg);
    RS_CHECK(rs_model_to(g, rs_device_cpu(), &err) == RS_OK, "to cpu: %s", err.msg);
    RS_CHECK(rs_model_params(g)[0] == rs_model_params(c)[0] + 0.5f &&
                 !memcmp(rs_model_params(g) + 1, rs_model_params(c) + 1, (n - 1) * sizeof(float)),
             "back on the CPU: every weight as it was on the guard");
    RS_CHECK(rs_model_params_map(c, &err) == rs_model_params(c), "on the CPU, map is the buffer itself");
    rs_model_free(c);
    rs_model_free(g);
}

static void pools(const char *spec)
{
    rs_model *m = build(spec, 1);
    rs_err err = {0};
    const rs_mem *mem = rs_model_mem(m);
    int64_t want = (int64_t)(rs_model_numel(m) ? rs_model_numel(m) : 1) * 4;
    const rs_device to[] = {GUARD, {RS_DEV_CPU, 0}, GUARD, {RS_DEV_CPU, 0}};
    for (int i = 0; i < 4; i++) {
        RS_CHECK(rs_model_to(m, to[i], &err) == RS_OK, "%s: move %d: %s", spec, i, err.msg);
        RS_CHECK(mem->live[RS_POOL_PARAMS] == want && mem->live[RS_POOL_GRADS] == want,
                 "%s: after move %d the pools hold params %lld, grads %lld bytes, not %lld", spec, i,
                 (long long)mem->live[RS_POOL_PARAMS], (long long)mem->live[RS_POOL_GRADS], (long long)want);
        RS_CHECK(rs_kctx_check(rs_model_ctx(m), &err) == RS_OK, "%s: move %d left a failure: %s", spec, i, err.msg);
    }
    rs_model_free(m);
}

static void refusals(void)
{
    rs_model *m = build(CNN, 2);
    rs_err err = {0};
    RS_CHECK(rs_model_to(m, GUARD, &err) == RS_OK, "to guard: %s", err.msg);
    RS_CHECK(rs_model_to(m, GUARD, &err) == RS_OK, "to where it is: nothing to do");
    int at[16];
    int nc = rs_model_cut_points(m, at, 16);
    RS_CHECK(nc > 0, "the CNN has cut points");
    if (nc > 0) {
        rs_acts *a = rs_acts_new_range(m, 0, at[0], 2, &err);
        RS_CHECK(a != NULL, "a range set: %s", err.msg);
        float x[2 * 64] = {0};
        const float *o = NULL;
        rs_status st = a ? rs_model_forward_range(m, a, 0, at[0], x, 2, &o, &err) : RS_OK;
        RS_CHECK(st == RS_ERR_UNSUPPORTED && strstr(err.msg, "runs on the CPU only"),
                 "a range on the guard is refused: %d %s", (int)st, err.msg);
        rs_acts_free(a);
    }
    rs_model_free(m);
}

int main(void)
{
    same_pass(GPT);
    same_pass(CNN);
    params_round_trip();
    pools(CNN);
    pools("seq in=4 relu");
    refusals();
    return rs_test_finish("model-move");
}
