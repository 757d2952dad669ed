/* ONNX ModelProto -> rs_onnx_graph (see import.h). One pass over the nodes in topological order keeps
 * an "import value" per name: computed at run time (a graph value with a symbolic shape), or known now
 * (float or int64 constant). Nodes whose inputs are all known are evaluated here by rs_op_run, the
 * engine's kernels a model runs them with; shape arithmetic carries the batch as RS_DIM_BATCH. Only what depends on the input
 * becomes a graph node. Every count, size and index from the file is checked before it is used. */
#include "import_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"

/* Elements that folding at import may create in all (a file of a few bytes must not make gigabytes). */
#define FOLD_BUDGET ((int64_t)1 << 24)
#define MAX_NODES 100000

/* ---- messages ---- */

rs_status rs_onnx_fail(imp *p, rs_status code, const char *fmt, ...)
{
    char msg[RS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->node && p->node->name && *p->node->name)
        return rs_err_set(p->err, code, "%s: node '%s' (%s, opset %lld): %s", p->file, p->node->name,
                          rs_onnx_str_or(p->node->op_type, "?"), (long long)p->opset, msg);
    if (p->node)
        return rs_err_set(p->err, code, "%s: node #%d (%s, opset %lld, unnamed): %s", p->file, p->node_index,
                          rs_onnx_str_or(p->node->op_type, "?"), (long long)p->opset, msg);
    return rs_err_set(p->err, code, "%s: %s", p->file, msg);
}

/* ---- name table ---- */

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static ival *lookup(imp *p, const char *name, bool create)
{
    if (!name) return NULL;
    size_t mask = p->ht_cap - 1, i = hash(name) & mask;
    for (; p->keys[i]; i = (i + 1) & mask)
        if (!strcmp(p->keys[i], name)) return &p->vals[i];
    if (!create) return NULL;
    p->keys[i] = strdup(name);
    if (!p->keys[i]) return NULL;
    p->vals[i] = (ival){.vid = -1};
    return &p->vals[i];
}

/* ---- graph building ---- */

static int add_value(imp *p, const char *name, const rs_dims *s, float *data)
{
    rs_onnx_graph *g = p->g;
    if (g->nvalues == p->cap_values) {
        int nc = p->cap_values ? p->cap_values * 2 : 64;
        rs_onnx_value *nv = realloc(g->values, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        g->values = nv;
        p->cap_values = nc;
    }
    rs_onnx_value *v = &g->values[g->nvalues];
    *v = (rs_onnx_value){.name = strdup(name ? name : ""), .shape = *s, .data = data, .producer = -1};
    if (!v->name) return -1;
    return g->nvalues++;
}

int rs_onnx_add_value(imp *p, const char *name, const rs_dims *s) { return add_value(p, name, s, NULL); }

ival *rs_onnx_lookup(imp *p, const char *name, bool create) { return lookup(p, name, create); }

/* The graph value behind an import value; constants become graph values (copied) on first use. */
static rs_status materialize(imp *p, ival *v, const char *name, int *vid)
{
    if (v->vid >= 0) {
        *vid = v->vid;
        return RS_OK;
    }
    float *data = NULL;
    size_t n = (size_t)rs_dims_numel(&v->shape, 1);
    if (v->kind == IV_F || v->kind == IV_I) {
        data = malloc(sizeof(float) * (n ? n : 1));
        if (!data) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < n; k++) {
            if (v->kind == IV_I && rs_onnx_batch_factor(v->i[k])) {
                free(data);
                return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "value '%s' uses the batch size as data", name);
            }
            data[k] = v->kind == IV_F ? v->f[k] : (float)v->i[k];
        }
    }
    int id = add_value(p, name, &v->shape, data);
    if (id < 0) {
        free(data);
        return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    }
    v->vid = *vid = id;
    return RS_OK;
}

/* The file's node name, or "OpType_k"; ":o" after it for output o > 0 of a multi-output node (Split),
 * which becomes one graph node per output. */
static char *node_name(const Onnx__NodeProto *np, int k, int o)
{
    char buf[96];
    const char *base = np->name && *np->name ? np->name : buf;
    if (base == buf) snprintf(buf, sizeof buf, "%.60s_%d", rs_onnx_str_or(np->op_type, "node"), k);
    size_t n = strlen(base) + 16;
    char *s = malloc(n);
    if (s) snprintf(s, n, o > 0 ? "%s:%d" : "%s", base, o);
    return s;
}

/* ---- node emission ---- */

/* Whether a folded result stays an integer constant: comparisons give bools, and data movement or
 * exact arithmetic on integer constants gives integers (when every value is one that a float holds
 * exactly), so Range -> Equal -> Where -> Cast chains keep feeding shapes and indices. */
static bool int_result(rs_op op, const rs_op_attrs *a, ival **ins, int nin, const float *out, int64_t n)
{
    bool cmp = (op == RS_OP_BINARY && ((a->sub >= RS_BINARY_EQUAL && a->sub <= RS_BINARY_GREATER_EQ) || a->sub >= RS_BINARY_AND)) ||
               (op == RS_OP_UNARY && (a->sub == RS_UNARY_NOT || a->sub == RS_UNARY_CAST_BOOL));
    bool moves = op == RS_OP_WHERE || op == RS_OP_EXPAND || op == RS_OP_SLICE ||
                 op == RS_OP_TRILU || op == RS_OP_CONCAT || op == RS_OP_TRANSPOSE ||
                 op == RS_OP_RESHAPE ||
                 (op == RS_OP_BINARY && a->sub != RS_BINARY_DIV && a->sub != RS_BINARY_POW && !cmp);
    if (!cmp && !moves) return false;
    if (!cmp)
        for (int k = op == RS_OP_WHERE ? 1 : 0; k < nin; k++)
            if (ins[k] && ins[k]->kind != IV_I) return false;
    for (int64_t k = 0; k < n; k++)
        if (!(fabsf(out[k]) <= 16777216.0f) || out[k] != truncf(out[k])) return false;
    return true;
}

/* Adds node op over inputs ins (ival pointers, NULL = absent), or evaluates it now when every input is
 * known. The result goes to c->res. */
rs_status rs_onnx_emit(nctx *c, rs_op op, const rs_op_attrs *a, ival **ins, int nin)
{
    imp *p = c->p;
    rs_onnx_node n = {.op = op, .name = (char *)rs_onnx_str_or(c->np->name, c->np->op_type), .op_type = c->np->op_type,
                      .nin = nin, .a = *a};
    const rs_dims *is[RS_OP_MAX_IN] = {0};
    bool all_const = true;
    if (nin > RS_OP_MAX_IN) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "more than %d inputs", RS_OP_MAX_IN);
    for (int k = 0; k < nin; k++) {
        n.in[k] = -1;
        if (!ins[k]) continue;
        if (op != RS_OP_GATHER && rs_onnx_reads_tokens(p, ins[k]))
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "reads the token ids '%s' as numbers; only a Gather of a constant "
                                "table (the embedding) takes them", p->g->values[p->g->input].name);
        is[k] = &ins[k]->shape;
        if (!rs_onnx_is_const(ins[k])) all_const = false;
    }
    rs_dims os;
    rs_err e2 = {0};
    if (rs_onnx_infer(&n, is, RS_DIM_BATCH, &os, &e2))
        return rs_err_set(p->err, e2.code, "%s: %s (opset %lld)", p->file, e2.msg, (long long)p->opset);
    int64_t on = rs_dims_numel(&os, 1);
    if (on < 0) return rs_onnx_fail(p, RS_ERR_SHAPE, "output would exceed 2^31 elements");
    int batch_dims = 0;
    for (int k = 0; k < os.rank; k++) batch_dims += os.d[k] == RS_DIM_BATCH;
    bool has_batch = batch_dims > 0;
    /* (N, 1) + (1, N) would give (N, N): rows would no longer be samples */
    if (batch_dims > 1) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "the batch would appear in two dimensions of the output");
    if (p->g->tokens && all_const && has_batch) /* it would read the model's input, which holds ids */
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a value of the batch made from constants alone; in a graph of token "
                            "ids every computed value comes from the embedding");
    if (all_const && !has_batch && on <= p->budget) {
        /* fold: evaluate now on the constants */
        float *bufs[RS_OP_MAX_IN] = {0};
        const float *cins[RS_OP_MAX_IN] = {0};
        rs_status st = RS_OK;
        for (int k = 0; k < nin && !st; k++) {
            if (!ins[k]) continue;
            if (ins[k]->kind == IV_F) {
                cins[k] = ins[k]->f;
                continue;
            }
            size_t m = (size_t)rs_dims_numel(&ins[k]->shape, 1);
            bufs[k] = malloc(sizeof(float) * (m ? m : 1));
            if (!bufs[k]) st = rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
            for (size_t j = 0; !st && j < m; j++) {
                if (rs_onnx_batch_factor(ins[k]->i[j])) st = rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "arithmetic on the batch size");
                else bufs[k][j] = (float)ins[k]->i[j];
            }
            cins[k] = bufs[k];
        }
        /* the engine's kernels, as the model will run the op: the same bits at import and at run time */
        const rs_kernels *cpu = rs_kernels_for(rs_device_cpu());
        float *out = st ? NULL : malloc(sizeof(float) * (size_t)(on ? on : 1));
        void *ws = NULL;
        size_t ws_bytes = 0;
        rs_kctx fold; /* constants are small: one thread */
        if (!st && rs_kctx_init(&fold, cpu, 1, &e2)) st = rs_err_set(p->err, e2.code, "%s: %s", p->file, e2.msg);
        if (!st && rs_op_workspace(&fold, op, a, is, &os, &ws_bytes, &e2))
            st = rs_err_set(p->err, e2.code, "%s: %s", p->file, e2.msg);
        if (!st) ws = malloc(ws_bytes + 64); /* owned here, with out */
        if (!st && (!out || !ws)) st = rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        if (!st && rs_op_run(&fold, op, a, cins, is, out, &os, ws, ws_bytes, &e2))
            st = rs_err_set(p->err, e2.code, "%s: %s", p->file, e2.msg);
        free(ws);
        for (int k = 0; k < nin; k++) free(bufs[k]);
        if (st) {
            free(out);
            return st;
        }
        p->budget -= on;
        c->res = (ival){.kind = IV_F, .shape = os, .f = out, .vid = -1};
        if (int_result(op, a, ins, nin, out, on)) {
            int64_t *iv = malloc(sizeof(int64_t) * (size_t)(on ? on : 1));
            if (!iv) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
            for (int64_t k = 0; k < on; k++) iv[k] = (int64_t)out[k];
            free(out);
            c->res = (ival){.kind = IV_I, .shape = os, .i = iv, .vid = -1};
        }
        return RS_OK;
    }
    for (int k = 0; k < nin; k++) {
        if (!ins[k]) continue;
        /* int constants (masks, bools) become floats; only a division would mean something else */
        if (ins[k]->kind == IV_I && op == RS_OP_BINARY && a->sub == RS_BINARY_DIV)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "integer input '%s' to a computed division", c->in_names[k]);
        rs_status st = materialize(p, ins[k], c->in_names[k], &n.in[k]);
        if (st) return st;
    }
    rs_onnx_graph *g = p->g;
    if (g->nnodes == p->cap_nodes) {
        int nc = p->cap_nodes ? p->cap_nodes * 2 : 32;
        rs_onnx_node *nn = realloc(g->nodes, sizeof *nn * (size_t)nc);
        if (!nn) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        g->nodes = nn;
        p->cap_nodes = nc;
    }
    const char *oname = (size_t)c->out_index < c->np->n_output ? c->np->output[c->out_index] : "";
    int out = add_value(p, oname, &os, NULL);
    if (out < 0) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    n.name = node_name(c->np, c->index, c->out_index);
    n.op_type = strdup(rs_onnx_str_or(c->np->op_type, "?"));
    n.out = out;
    if (!n.name || !n.op_type) {
        free(n.name);
        free(n.op_type);
        return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    }
    g->values[out].producer = g->nnodes;
    g->nodes[g->nnodes++] = n;
    c->res = (ival){.kind = IV_DYN, .shape = os, .vid = out};
    return RS_OK;
}

/* ---- the whole model ---- */

/* Kahn's algorithm over node indices; a node left over sits on a cycle. */
static rs_status topo_order(imp *p, const Onnx__GraphProto *gp, int *order)
{
    size_t n = gp->n_node;
    int *indeg = calloc(n ? n : 1, sizeof(int)), *queue = malloc(sizeof(int) * (n ? n : 1));
    int *prod_of = NULL;
    /* producer of each name: reuse the hash table slots (vid field of a scratch table) */
    size_t cap = p->ht_cap;
    prod_of = malloc(sizeof(int) * cap);
    int *edges_start = calloc(n + 1, sizeof(int)), *edges = NULL;
    rs_status st = RS_OK;
    if (!indeg || !queue || !prod_of || !edges_start) {
        st = rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < cap; i++) prod_of[i] = -1;
    size_t mask = cap - 1;
    for (size_t k = 0; k < n; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t o = 0; o < np->n_output; o++) {
            const char *nm = np->output[o];
            if (!nm || !*nm) continue;
            size_t i = hash(nm) & mask;
            while (p->keys[i] && strcmp(p->keys[i], nm)) i = (i + 1) & mask;
            if (!p->keys[i]) continue;
            if (prod_of[i] >= 0 || p->vals[i].kind != IV_NONE) {
                p->node = np, p->node_index = (int)k;
                st = rs_onnx_fail(p, RS_ERR_FORMAT, "value '%s' is defined twice", nm);
                goto done;
            }
            prod_of[i] = (int)k;
        }
    }
    /* edges: producer -> consumer, counted then filled */
    size_t ne = 0;
    for (size_t k = 0; k < n; k++) ne += gp->node[k]->n_input;
    edges = malloc(sizeof(int) * (ne ? ne : 1));
    int *fill = calloc(n + 1, sizeof(int));
    if (!edges || !fill) {
        free(fill);
        st = rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        goto done;
    }
    int *src = malloc(sizeof(int) * (ne ? ne : 1)), *dst = malloc(sizeof(int) * (ne ? ne : 1));
    size_t m = 0;
    if (!src || !dst) {
        free(fill), free(src), free(dst);
        st = rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t j = 0; j < np->n_input; j++) {
            const char *nm = np->input[j];
            if (!nm || !*nm) continue;
            size_t i = hash(nm) & mask;
            while (p->keys[i] && strcmp(p->keys[i], nm)) i = (i + 1) & mask;
            if (!p->keys[i] || (prod_of[i] < 0 && p->vals[i].kind == IV_NONE)) {
                p->node = np, p->node_index = (int)k;
                free(fill), free(src), free(dst);
                st = rs_onnx_fail(p, RS_ERR_FORMAT, "input '%s' is not defined (no initializer, graph input or node output)", nm);
                goto done;
            }
            if (prod_of[i] < 0) continue;
            src[m] = prod_of[i];
            dst[m++] = (int)k;
            indeg[k]++;
            edges_start[prod_of[i] + 1]++;
        }
    }
    for (size_t k = 0; k < n; k++) edges_start[k + 1] += edges_start[k];
    for (size_t e = 0; e < m; e++) edges[edges_start[src[e]] + fill[src[e]]++] = dst[e];
    free(fill), free(src), free(dst);
    size_t head = 0, tail = 0, done_n = 0;
    for (size_t k = 0; k < n; k++)
        if (!indeg[k]) queue[tail++] = (int)k;
    while (head < tail) {
        int k = queue[head++];
        order[done_n++] = k;
        for (int e = edges_start[k]; e < edges_start[k + 1]; e++)
            if (--indeg[edges[e]] == 0) queue[tail++] = edges[e];
    }
    if (done_n < n) {
        for (size_t k = 0; k < n; k++)
            if (indeg[k]) {
                p->node = NULL;
                st = rs_onnx_fail(p, RS_ERR_FORMAT, "cyclic graph: node '%s' (%s) depends on its own output",
                                  rs_onnx_str_or(gp->node[k]->name, "?"), rs_onnx_str_or(gp->node[k]->op_type, "?"));
                break;
            }
    }
done:
    free(indeg), free(queue), free(prod_of), free(edges_start), free(edges);
    return st;
}

/* Drops nodes and values the output does not need, renumbering what stays. */
static rs_status prune(imp *p)
{
    rs_onnx_graph *g = p->g;
    bool *need = calloc((size_t)g->nvalues + 1, 1);
    int *map = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    if (!need || !map) {
        free(need), free(map);
        return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    }
    need[g->output] = need[g->input] = true;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const rs_onnx_node *n = &g->nodes[k];
        if (!need[n->out]) continue;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] >= 0) need[n->in[j]] = true;
    }
    int nv = 0;
    for (int i = 0; i < g->nvalues; i++) {
        if (need[i]) {
            map[i] = nv;
            g->values[nv++] = g->values[i];
        } else {
            free(g->values[i].name);
            free(g->values[i].data);
            map[i] = -1;
        }
    }
    int nn = 0;
    for (int k = 0; k < g->nnodes; k++) {
        rs_onnx_node n = g->nodes[k];
        if (map[n.out] < 0) {
            free(n.name);
            free(n.op_type);
            continue;
        }
        n.out = map[n.out];
        for (int j = 0; j < n.nin; j++)
            if (n.in[j] >= 0) n.in[j] = map[n.in[j]];
        g->values[n.out].producer = nn;
        g->nodes[nn++] = n;
    }
    g->nvalues = nv;
    g->nnodes = nn;
    g->input = map[g->input];
    g->output = map[g->output];
    free(need);
    free(map);
    return RS_OK;
}

/* One node, in topological order: its registry entry's handler, on its inputs' import values; what it
 * makes goes to the name table under its outputs' names. */
static rs_status import_node(imp *p, const Onnx__NodeProto *np, int k)
{
    p->node = np;
    p->node_index = k;
    if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx"))
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "operator domain '%s' (only the default ONNX domain)", np->domain);
    const rs_onnx_op_def *def = rs_onnx_op_find(np->op_type);
    if (!def) {
        p->node = NULL;
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "unsupported operator '%s' (node '%s', opset %lld); supported: %s",
                            rs_onnx_str_or(np->op_type, "?"), rs_onnx_str_or(np->name, "?"), (long long)p->opset,
                            rs_onnx_supported_ops());
    }
    p->op = def;
    nctx c = {.p = p, .np = np, .def = def, .index = k, .nin = (int)np->n_input};
    if (np->n_input > RS_ONNX_MAX_NODE_IN)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%zu inputs (the importer reads at most %d)", np->n_input,
                            RS_ONNX_MAX_NODE_IN);
    for (int j = 0; j < c.nin; j++) {
        c.in_names[j] = np->input[j];
        if (!np->input[j] || !*np->input[j]) continue;
        c.in[j] = lookup(p, np->input[j], false);
        if (!c.in[j] || c.in[j]->kind == IV_NONE)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' comes from an output this importer does not produce "
                                "(only the first output of a node is supported)", np->input[j]);
    }
    if (np->n_output < 1 || !np->output[0] || !*np->output[0]) return RS_OK; /* nothing to produce */
    c.res.vid = -1;
    int grouped = -1;
    bool counts = false; /* an input counts the samples: import_strided.c follows it */
    for (int j = 0; j < c.nin; j++) counts |= c.in[j] && c.in[j]->bstep;
    rs_status st = counts ? rs_onnx_batch_index_node(&c) : rs_onnx_batch_gate(&c, &grouped);
    if (!st && !counts) st = def->import(&c);
    if (!st && !counts) st = rs_onnx_batch_after(&c, grouped);
    for (int o = 0; !st && o <= c.nmore; o++) {
        const char *oname = (size_t)o < np->n_output ? np->output[o] : NULL;
        ival *out = oname && *oname ? lookup(p, oname, false) : NULL;
        if (oname && *oname && !out) st = rs_onnx_fail(p, RS_ERR_INTERNAL, "output slot missing");
        else if (out) {
            *out = o ? c.more[o - 1] : c.res;
            if (o) c.more[o - 1] = (ival){.vid = -1};
            else c.res = (ival){.vid = -1};
        }
    }
    rs_onnx_ival_clear(&c.res);
    for (int o = 0; o < c.nmore; o++) rs_onnx_ival_clear(&c.more[o]);
    return st;
}

/* Every node's operator is one the registry knows, and not one it refuses, checked before any node is
 * imported: a file is refused naming the operator it needs (torch's LSTM, say) rather than something the
 * importer met on the way to it (the ConstantOfShape of the LSTM's batch-sized initial state). */
static rs_status known_ops(imp *p, const Onnx__GraphProto *gp)
{
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx")) continue;
        const rs_onnx_op_def *def = rs_onnx_op_find(np->op_type);
        if (def && def->import != rs_onnx_h_recurrent) continue;
        p->node = def ? np : NULL;
        p->node_index = (int)k;
        if (def) return def->import(&(nctx){.p = p, .np = np, .def = def, .index = (int)k});
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "unsupported operator '%s' (node '%s', opset %lld); supported: %s",
                            rs_onnx_str_or(np->op_type, "?"), rs_onnx_str_or(np->name, "?"), (long long)p->opset,
                            rs_onnx_supported_ops());
    }
    return RS_OK;
}

/* Every initializer as a constant import value under its name. */
static rs_status read_initializers(imp *p, const Onnx__GraphProto *gp)
{
    char what[160];
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *t = gp->initializer[k];
        const char *nm = rs_onnx_str_or(t->name, "");
        if (!*nm) return rs_onnx_fail(p, RS_ERR_FORMAT, "initializer %zu has no name", k);
        ival *v = lookup(p, nm, true);
        if (!v) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
        if (v->kind != IV_NONE) return rs_onnx_fail(p, RS_ERR_FORMAT, "initializer '%s' appears twice", nm);
        snprintf(what, sizeof what, "initializer '%.100s'", nm);
        rs_status st = rs_onnx_tensor_to_ival(p, t, what, v);
        if (st) return st;
    }
    return RS_OK;
}

static rs_status import_model(imp *p, const Onnx__ModelProto *m)
{
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) return rs_onnx_fail(p, RS_ERR_FORMAT, "the model has no graph");
    p->opset = 0;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[k];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) p->opset = o->version;
    }
    if (p->opset < 1) return rs_onnx_fail(p, RS_ERR_FORMAT, "no opset_import for the default domain");
    if (gp->n_node > MAX_NODES) return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "%zu nodes (at most %d)", gp->n_node, MAX_NODES);
    size_t names = gp->n_initializer + gp->n_input + 1;
    for (size_t k = 0; k < gp->n_node; k++) names += gp->node[k]->n_output + gp->node[k]->n_input;
    p->ht_cap = 16;
    while (p->ht_cap < 2 * names) p->ht_cap *= 2;
    p->keys = calloc(p->ht_cap, sizeof(char *));
    p->vals = calloc(p->ht_cap, sizeof(ival));
    rs_onnx_graph *g = p->g = calloc(1, sizeof *g);
    if (!p->keys || !p->vals || !g) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    g->opset = p->opset;
    g->name = strdup(rs_onnx_str_or(gp->name, "graph"));
    char prod[160];
    snprintf(prod, sizeof prod, "%.60s%s%.60s", rs_onnx_str_or(m->producer_name, "unknown producer"),
             m->producer_version && *m->producer_version ? " " : "", rs_onnx_str_or(m->producer_version, ""));
    g->producer = strdup(prod);
    if (!g->name || !g->producer) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    rs_status st = known_ops(p, gp);
    if (!st) st = read_initializers(p, gp);
    if (st) return st;
    if ((st = rs_onnx_read_inputs(p, gp))) return st;
    if (gp->n_output < 1 || !gp->output[0]->name) return rs_onnx_fail(p, RS_ERR_FORMAT, "the graph has no output");
    /* every name a node mentions gets a slot, so topo_order can find producers by name */
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        for (size_t o = 0; o < np->n_output; o++)
            if (np->output[o] && *np->output[o] && !lookup(p, np->output[o], true))
                return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    }
    int *order = malloc(sizeof(int) * (gp->n_node ? gp->n_node : 1));
    if (!order) return rs_onnx_fail(p, RS_ERR_NOMEM, "out of memory");
    if ((st = topo_order(p, gp, order))) {
        free(order);
        return st;
    }
    for (size_t q = 0; q < gp->n_node && !st; q++) st = import_node(p, gp->node[order[q]], order[q]);
    free(order);
    p->node = NULL;
    if (st) return st;
    const char *oname = gp->output[0]->name;
    ival *ov = lookup(p, oname, false);
    if (!ov || ov->kind == IV_NONE) return rs_onnx_fail(p, RS_ERR_FORMAT, "graph output '%s' is not produced by any node", oname);
    if (ov->kind != IV_DYN)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "graph output '%s' is a constant: it does not depend on the input", oname);
    if (g->tokens && ov->vid == g->input)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "graph output '%s' is the token ids themselves", oname);
    int batch_dims = 0;
    for (int k = 0; k < ov->shape.rank; k++) batch_dims += ov->shape.d[k] == RS_DIM_BATCH;
    if (!g->fixed_batch && batch_dims != 1)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "graph output '%s' does not keep the batch dimension", oname);
    g->output = ov->vid;
    return prune(p);
}

static void imp_free(imp *p)
{
    if (p->keys) {
        for (size_t i = 0; i < p->ht_cap; i++) {
            free(p->keys[i]);
            if (p->vals) rs_onnx_ival_clear(&p->vals[i]);
        }
    }
    free(p->keys);
    free(p->vals);
}

static rs_status load_buffer(const uint8_t *buf, size_t n, const char *name, const char *dir, rs_onnx_graph **out,
                             rs_err *err)
{
    *out = NULL;
    name = name ? name : "<buffer>";
    if (!buf && n) return rs_err_set(err, RS_ERR_ARG, "%s: no data", name);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    if (!m)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: not a valid ONNX ModelProto (%zu bytes did not parse as protobuf; "
                          "truncated, or not an .onnx file?)", name, n);
    imp p = {.file = name, .err = err, .budget = FOLD_BUDGET, .dir = dir};
    rs_status st = import_model(&p, m);
    imp_free(&p);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st) {
        rs_onnx_graph_free(p.g);
        return st;
    }
    *out = p.g;
    return RS_OK;
}

rs_status rs_onnx_load_buffer(const uint8_t *buf, size_t n, const char *name, rs_onnx_graph **out, rs_err *err)
{
    return load_buffer(buf, n, name, NULL, out, err);
}

rs_status rs_onnx_load(const char *path, rs_onnx_graph **out, rs_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory reading the file", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return rs_err_set(err, RS_ERR_IO, "%s: read error", path);
    }
    /* external data files are found next to the model */
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir) {
        free(buf);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", path);
    }
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else strcpy(dir, ".");
    rs_status st = load_buffer(buf, len, path, dir, out, err);
    free(dir);
    free(buf);
    return st;
}
