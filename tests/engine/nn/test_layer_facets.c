/* Every layer kind has every facet it should (engine/nn/layer.h, docs/add-a-layer.md), and each facet
 * works: walking the registry, for each kind its descriptor is complete; its example model parses and
 * every layer of it re-parses from its spelling; an activation's operator round-trips; the example
 * exports to ONNX and imports back to the same kinds and outputs; it compiles to a plan that computes
 * what the engine does; a layer that tensor parallelism runs inside a pair is placed there; a layer
 * with a one-position form generates with the KV cache what a full recomputation gives. A new kind
 * that lacks any of these fails here, naming the kind and the facet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/nn/generate.h"
#include "engine/nn/spec.h"
#include "engine/nn/tp.h"
#include "onnx/export.h"
#include "onnx/graph.h"
#include "onnx/import.h"
#include "onnx/ops.h"
#include "plan/plan.h"
#include "rs_test.h"

#define BATCH 3

static rs_model *parse(const char *spec, rs_err *err)
{
    rs_model *m = NULL;
    if (rs_model_parse(spec, "m", rs_device_cpu(), NULL, 7, &m, NULL, err)) return NULL;
    rs_model_set_training(m, false);
    return m;
}

static bool has_kind(rs_model *m, rs_layer_kind k)
{
    for (int i = 0; i < rs_model_layer_count(m); i++)
        if (rs_model_layer(m, i)->cfg.kind == k) return true;
    return false;
}

/* BATCH samples of m's input: floats in [-2, 2), or token ids below the vocabulary. */
static void *input(rs_model *m)
{
    size_t n = (size_t)BATCH * (size_t)rs_shape_numel(rs_model_input_shape(m));
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        if (rs_model_tokens(m)) ((int32_t *)(void *)x)[i] = (int32_t)((i * 7 + 3) % (size_t)rs_model_vocab(m));
        else x[i] = (float)((int)((i * 37 + 11) % 64) - 32) / 16.0f;
    }
    return x;
}

static size_t out_count(rs_model *m)
{
    const rs_layer *last = rs_model_layer(m, rs_model_layer_count(m) - 1);
    return (size_t)BATCH * (size_t)rs_shape_numel(&last->out);
}

static void check_close(const char *kind, const char *facet, const float *a, const float *b, size_t n, double tol)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (d > worst || d != d) worst = d;
    }
    RS_CHECK(worst <= tol, "%s: %s differs from the engine by %.3g (tolerance %.1g)", kind, facet, worst, tol);
}

static void check_descriptor(rs_layer_kind k, const rs_layer_ops *o)
{
    const char *kind = o->kind ? o->kind : "?";
    RS_CHECK(o->kind && o->kind[0], "kind %d has no spelling", (int)k);
    RS_CHECK(o->setup != NULL, "%s: no setup (shape rule)", kind);
    RS_CHECK(o->forward || o->forward2 || o->forward_n, "%s: no forward", kind);
    RS_CHECK(o->tp != RS_LAYER_TP_UNSET, "%s: says nothing of tensor parallelism (.tp)", kind);
    RS_CHECK(o->gen != RS_LAYER_GEN_UNSET, "%s: says nothing of a one-position form (.gen)", kind);
    RS_CHECK(o->gen != RS_LAYER_GEN_STEP || o->step, "%s: .gen is STEP without a step()", kind);
    RS_CHECK(o->unspelled || o->example, "%s: a spellable kind without an example model", kind);
    RS_CHECK(!o->word || !strncmp(o->word, o->kind, strlen(o->kind)), "%s: completion offers '%s'", kind,
             o->word ? o->word : "");
    RS_CHECK(!o->unary_of == !o->from_unary, "%s: unary_of and from_unary go together", kind);
    if (!o->unspelled) RS_CHECK(rs_layer_kind_by_name(o->kind) == k, "%s: its name finds another kind", kind);
    RS_CHECK(!o->onnx_chain || o->unary_of, "%s: an ONNX chain without the operator the plan lowers it to", kind);
    for (const rs_layer_onnx_node *c = o->onnx_chain; c && c->op; c++)
        RS_CHECK(rs_onnx_op_find(c->op) != NULL, "%s: its ONNX chain's '%s' is no operator the importer knows", kind,
                 c->op);
}

/* The example parses, has the kind, and each layer's spelling parses back to the same spelling. */
static rs_model *check_spelling(rs_layer_kind k, const rs_layer_ops *o)
{
    rs_err err = {0};
    rs_model *m = parse(o->example, &err);
    RS_CHECK(m != NULL, "%s: example '%s' does not parse: %s", o->kind, o->example, err.msg);
    if (!m) return NULL;
    RS_CHECK(has_kind(m, k), "%s: example '%s' has no %s layer", o->kind, o->example, o->kind);
    for (int i = 0; i < rs_model_layer_count(m); i++) {
        const rs_layer_cfg *c = &rs_model_layer(m, i)->cfg;
        if (rs_layer_ops_for(c->kind)->unspelled) continue;
        char s1[128], s2[128];
        rs_layer_cfg back;
        rs_layer_cfg_str(c, s1, sizeof s1);
        RS_CHECK(rs_layer_parse(s1, &back, NULL, &err) == RS_OK, "%s: '%s' does not parse: %s", o->kind, s1, err.msg);
        RS_CHECK(back.kind == c->kind && !strcmp(rs_layer_cfg_str(&back, s2, sizeof s2), s1),
                 "%s: '%s' parses back as '%s'", o->kind, s1, s2);
    }
    if (o->unary_of) {
        rs_layer_cfg c = rs_layer_cfg_default(k), back;
        RS_CHECK(rs_layer_for_unary(o->unary_of(&c), &back) && back.kind == k, "%s: its operator %d finds another kind",
                 o->kind, o->unary_of(&c));
    }
    return m;
}

/* Export, import back, same kinds and same outputs. */
static void check_onnx(rs_layer_kind k, const rs_layer_ops *o, rs_model *m, const void *x, const float *want)
{
    char path[64];
    snprintf(path, sizeof path, "facet-%s-%d.onnx", o->kind, (int)getpid());
    rs_err err = {0};
    rs_onnx_graph *g = NULL;
    rs_model *back = NULL;
    rs_status st = rs_onnx_export(m, path, 17, &err);
    RS_CHECK(st == RS_OK, "%s: export: %s", o->kind, err.msg);
    if (!st) st = rs_onnx_load(path, &g, &err);
    /* a trainable import where the graph is a plain layer sequence, else an inference model */
    if (!st && rs_onnx_to_model(g, "back", &back, &err)) st = rs_onnx_to_inference_model(g, "back", &back, &err);
    RS_CHECK(st == RS_OK, "%s: import of its export: %s", o->kind, err.msg);
    if (!st) {
        /* dropout is the identity at inference: export writes no node for it */
        RS_CHECK(k == RS_LAYER_DROPOUT || has_kind(back, k), "%s: the import of its export has no %s layer", o->kind,
                 o->kind);
        const float *y = NULL;
        st = rs_model_forward(back, x, BATCH, &y, &err);
        RS_CHECK(st == RS_OK, "%s: forward of the import: %s", o->kind, err.msg);
        if (!st) check_close(o->kind, "the import of its export", y, want, out_count(m), 1e-5);
    }
    rs_model_free(back);
    rs_onnx_graph_free(g);
    unlink(path);
}

static void check_plan(const rs_layer_ops *o, rs_model *m, const void *x, const float *want)
{
    rs_plan_opts po = rs_plan_opts_default();
    po.batch = BATCH;
    po.threads = 1;
    rs_plan *p = NULL;
    rs_err err = {0};
    rs_status st = rs_plan_compile(m, &po, &p, &err);
    RS_CHECK(st == RS_OK, "%s: compile: %s", o->kind, err.msg);
    const float *y = NULL;
    if (!st) st = rs_plan_run(p, x, BATCH, &y, &err);
    RS_CHECK(st == RS_OK, "%s: plan run: %s", o->kind, err.msg);
    if (!st) check_close(o->kind, "its fp32 plan", y, want, out_count(m), 1e-4);
    rs_plan_free(p);
}

/* A layer that runs inside a split pair is placed inside one in its example. */
static void check_tp(rs_layer_kind k, const rs_layer_ops *o, rs_model *m)
{
    if (o->tp != RS_LAYER_TP_ELEMENTWISE && o->tp != RS_LAYER_TP_HEADS) return;
    rs_tp_plan *p = NULL;
    rs_err err = {0};
    RS_CHECK(rs_tp_plan_new(m, 2, &p, &err) == RS_OK, "%s: tensor-parallel plan of its example: %s", o->kind, err.msg);
    if (!p) return;
    bool inner = false;
    for (int i = 0; i < rs_model_layer_count(m); i++)
        if (rs_model_layer(m, i)->cfg.kind == k && rs_tp_plan_role(p, i) == RS_TP_INNER) inner = true;
    RS_CHECK(inner, "%s: tensor parallelism does not run it inside a pair of its example", o->kind);
    rs_tp_plan_free(p);
}

/* A token model with the layer: the example itself, or the layer between an embedding and a head. */
static rs_model *token_model(rs_layer_kind k, const rs_layer_ops *o, rs_model *ex, rs_err *err)
{
    if (rs_model_tokens(ex)) return parse(o->example, err);
    char spec[256], s[128] = "";
    if (k == RS_LAYER_ADD) {
        snprintf(spec, sizeof spec, "seq ctx=6 embed(11,8) res[ linear(8) ] linear(11)");
    } else {
        for (int i = 0; i < rs_model_layer_count(ex); i++)
            if (rs_model_layer(ex, i)->cfg.kind == k) rs_layer_cfg_str(&rs_model_layer(ex, i)->cfg, s, sizeof s);
        snprintf(spec, sizeof spec, "seq ctx=6 embed(11,8) %s linear(11)", s);
    }
    return parse(spec, err);
}

/* The cache's logits at each position equal a full recomputation's. */
static void check_generation(rs_layer_kind k, const rs_layer_ops *o, rs_model *ex)
{
    rs_err err = {0};
    rs_model *m = token_model(k, o, ex, &err);
    if (o->gen == RS_LAYER_GEN_NONE) {
        rs_model_free(m);
        return;
    }
    RS_CHECK(m != NULL, "%s: a token model with it: %s", o->kind, err.msg);
    if (!m) return;
    rs_gen *g = rs_gen_new(m, &err);
    RS_CHECK(g != NULL, "%s: a decoder: %s", o->kind, err.msg);
    int V = rs_model_vocab(m);
    float *a = malloc(2 * (size_t)V * sizeof *a), *b = a + V;
    int32_t toks[6] = {1, 5, 2, 9, 0, 7};
    for (int t = 0; g && t < 6; t++) {
        RS_CHECK(rs_gen_push(g, toks[t], a, &err) == RS_OK, "%s: cache step %d: %s", o->kind, t, err.msg);
        RS_CHECK(rs_gen_full_logits(m, NULL, toks, t + 1, b, &err) == RS_OK, "%s: recompute %d: %s", o->kind, t,
                 err.msg);
        check_close(o->kind, "generation with the cache", a, b, (size_t)V, 1e-5);
    }
    free(a);
    rs_gen_free(g);
    rs_model_free(m);
}

int main(void)
{
    int kinds = 0;
    for (int k = 0; k < RS_LAYER_KIND_COUNT; k++) {
        const rs_layer_ops *o = rs_layer_ops_for((rs_layer_kind)k);
        RS_CHECK(o != NULL, "kind %d has no descriptor in layers.def", k);
        if (!o) continue;
        check_descriptor((rs_layer_kind)k, o);
        if (o->unspelled && !o->example) continue;
        rs_model *m = check_spelling((rs_layer_kind)k, o);
        if (!m) continue;
        kinds++;
        void *x = input(m);
        const float *y = NULL;
        rs_err err = {0};
        RS_CHECK(rs_model_forward(m, x, BATCH, &y, &err) == RS_OK, "%s: forward of its example: %s", o->kind, err.msg);
        size_t n = out_count(m);
        float *want = malloc(n * sizeof *want);
        memcpy(want, y, n * sizeof *want);
        if (o->word || o->unspelled) { /* tensor parallelism's own layers have no ONNX form or plan */
            check_onnx((rs_layer_kind)k, o, m, x, want);
            check_plan(o, m, x, want);
        }
        check_tp((rs_layer_kind)k, o, m);
        check_generation((rs_layer_kind)k, o, m);
        free(want);
        free(x);
        rs_model_free(m);
    }
    printf("%d layer kinds, %d with an example model, checked\n", RS_LAYER_KIND_COUNT, kinds);
    return rs_test_finish("layer-facets");
}
