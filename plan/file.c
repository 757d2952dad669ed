/* The plan file: a 24-byte header (magic "RINGPLAN", format version, CRC-32 of the payload, payload
 * length; little-endian) then the Plan message of plan.proto, packed by protobuf-c. The header lets a
 * reader say "truncated", "corrupted" or "another version" before it parses anything; the message
 * carries the ISA and oneDNN version (a cuda plan: its GPU target and libraries), checked before the
 * graph is read, and the graph is validated (validate.c) before any primitive is made from it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ir.h"
#include "plan/plan.pb-c.h"

#define MAGIC "RINGPLAN"
#define HEADER 24
#define MAX_FILE ((size_t)1 << 32)

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static uint64_t get64(const uint8_t *b) { return (uint64_t)get32(b) | (uint64_t)get32(b + 4) << 32; }

/* ---- writing ---- */

/* Everything the message points to lives in one arena of small allocations freed together. */
typedef struct pool {
    void **p;
    int n, cap;
} pool;

static void *palloc(pool *a, size_t bytes)
{
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        void **q = realloc(a->p, (size_t)cap * sizeof *q);
        if (!q) return NULL;
        a->p = q;
        a->cap = cap;
    }
    void *x = calloc(1, bytes ? bytes : 1);
    if (x) a->p[a->n++] = x;
    return x;
}

static void pool_clear(pool *a)
{
    for (int i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
}

static Rsplan__Dims *dims_msg(pool *a, const rs_dims *d)
{
    Rsplan__Dims *m = palloc(a, sizeof *m);
    if (!m) return NULL;
    rsplan__dims__init(m);
    m->n_d = (size_t)d->rank;
    m->d = palloc(a, sizeof(int64_t) * RS_DIMS_MAX);
    if (!m->d) return NULL;
    for (int i = 0; i < d->rank; i++) m->d[i] = d->d[i];
    return m;
}

static bool node_msg(pool *a, const rs_plan *p, const rs_pnode *n, Rsplan__Node *m)
{
    rsplan__node__init(m);
    m->kind = n->kind;
    m->name = (char *)n->name;
    m->n_inputs = (size_t)n->nin;
    m->inputs = palloc(a, sizeof(int32_t) * RS_OP_MAX_IN);
    m->n_const_inputs = (size_t)n->nin;
    m->const_inputs = palloc(a, sizeof(int32_t) * RS_OP_MAX_IN);
    if (!m->inputs || !m->const_inputs) return false;
    for (int i = 0; i < n->nin; i++) {
        m->inputs[i] = n->in[i];
        m->const_inputs[i] = n->cin[i];
    }
    m->output = n->out;
    m->precision = n->prec;
    const rs_conv_geom *g = &n->g;
    int geom[12] = {g->c, g->h, g->w, g->oc, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->oh, g->ow};
    m->n_geom = 12;
    m->geom = palloc(a, sizeof geom);
    if (!m->geom) return false;
    memcpy(m->geom, geom, sizeof geom);
    m->has_in_features = m->has_out_features = m->has_rows = true;
    m->in_features = n->I;
    m->out_features = n->O;
    m->rows = n->rows;
    m->has_weight = m->has_bias = m->has_tmp = true;
    m->weight = n->w;
    m->bias = n->b;
    m->tmp = n->tmp;
    m->n_post = (size_t)n->npost;
    m->post = palloc(a, sizeof *m->post * RS_PLAN_MAX_POST);
    if (!m->post) return false;
    for (int j = 0; j < n->npost; j++) {
        Rsplan__PostOp *q = palloc(a, sizeof *q);
        if (!q) return false;
        rsplan__post_op__init(q);
        q->kind = n->post[j].kind;
        q->has_op = q->has_alpha = q->has_beta = q->has_value = true;
        q->op = n->post[j].op;
        q->alpha = n->post[j].alpha;
        q->beta = n->post[j].beta;
        q->value = n->post[j].value;
        m->post[j] = q;
    }
    m->has_act = m->has_alpha = m->has_beta = m->has_eps = true;
    m->act = n->act;
    m->alpha = n->alpha;
    m->beta = n->beta;
    m->eps = n->eps;
    m->has_qscale = m->has_oscales = true;
    m->qscale = n->qscale;
    m->oscales = n->oscales;
    m->has_conv_alg = m->has_conv_alg_1 = true;
    m->conv_alg = n->alg;
    m->conv_alg_1 = n->alg1;
    m->has_group = n->group != 1;
    m->group = n->group;
    m->impl = n->impl[0] ? (char *)n->impl : NULL; /* borrowed: the plan outlives the packed message */
    m->has_avg_exclude = n->avg_exclude;
    m->avg_exclude = n->avg_exclude;
    m->has_t = m->has_c = m->has_v = m->has_heads = true;
    m->t = n->T;
    m->c = n->C;
    m->v = n->V;
    m->heads = n->heads;
    if (n->kind == RS_PK_OP) {
        m->has_op = true;
        m->op = n->op;
        Rsplan__OpAttrs *at = palloc(a, sizeof *at);
        if (!at) return false;
        rsplan__op_attrs__init(at);
        at->has_sub = at->has_axis = at->has_legacy_softmax = at->has_alpha = at->has_beta = true;
        at->sub = n->a.sub;
        at->axis = n->a.axis;
        at->legacy_softmax = n->a.legacy_softmax;
        at->alpha = n->a.alpha;
        at->beta = n->a.beta;
        if (n->op == RS_OP_TRANSPOSE) {
            at->n_perm = (size_t)n->ds[0].rank;
            at->perm = palloc(a, sizeof(int32_t) * RS_DIMS_MAX);
            if (!at->perm) return false;
            for (int i = 0; i < n->ds[0].rank; i++) at->perm[i] = n->a.perm[i];
        }
        if (n->op == RS_OP_SLICE) {
            at->n_starts = at->n_steps = (size_t)n->ds[0].rank;
            at->starts = palloc(a, sizeof(int64_t) * RS_DIMS_MAX);
            at->steps = palloc(a, sizeof(int64_t) * RS_DIMS_MAX);
            if (!at->starts || !at->steps) return false;
            memcpy(at->starts, n->a.starts, sizeof(int64_t) * at->n_starts);
            memcpy(at->steps, n->a.steps, sizeof(int64_t) * at->n_steps);
            if (!(at->shape = dims_msg(a, &n->a.shape))) return false;
        }
        at->has_axes_mask = at->has_keepdims = true;
        at->axes_mask = n->a.axes_mask;
        at->keepdims = n->a.keepdims;
        m->attrs = at;
        m->n_in_dims = (size_t)n->nin;
        m->in_dims = palloc(a, sizeof *m->in_dims * RS_OP_MAX_IN);
        if (!m->in_dims) return false;
        for (int i = 0; i < n->nin; i++)
            if (!(m->in_dims[i] = dims_msg(a, &n->ds[i]))) return false;
        if (!(m->out_dims = dims_msg(a, &n->dout))) return false;
    }
    (void)p;
    return true;
}

rs_status rs_plan_serialize(const rs_plan *p, uint8_t **buf, size_t *n, rs_err *err)
{
    pool a = {0};
    Rsplan__Plan m;
    rsplan__plan__init(&m);
    m.format_version = RS_PLAN_FORMAT_VERSION;
    m.isa = (char *)p->isa;
    m.dnnl_version = (char *)p->dnnl_version;
    m.device = (char *)p->device;
    m.precision = p->prec;
    m.batch = p->batch;
    m.source = (char *)p->source;
    m.tokens = p->tokens;
    m.n_input_shape = (size_t)p->in.ndim;
    m.input_shape = (int64_t *)p->in.d;
    m.classes = p->classes;
    m.rows = p->rows;
    m.has_vocab = true;
    m.vocab = p->vocab;
    m.output = p->output;
    m.arena_bytes = p->arena_bytes;
    m.scratch_offset = p->scratch_off;
    m.scratch_bytes = p->scratch_bytes;
    m.has_naive_bytes = m.has_nodes_before = m.has_views_removed = m.has_build_seconds = true;
    m.naive_bytes = p->naive_bytes;
    m.nodes_before = p->nodes_before;
    m.views_removed = p->views_removed;
    m.build_seconds = p->build_s;
    m.has_build_threads = true;
    m.build_threads = p->build_threads;
    if (p->dev == RS_PLAN_DEV_CUDA) {
        m.cuda_target = (char *)p->cuda_target;
        m.cudnn_version = (char *)p->cudnn_version;
        m.cublaslt_version = (char *)p->cublaslt_version;
    }
    bool ok = true;
    m.n_nodes = (size_t)p->nnodes;
    m.nodes = palloc(&a, sizeof *m.nodes * (size_t)(p->nnodes + 1));
    ok = ok && m.nodes;
    for (int i = 0; ok && i < p->nnodes; i++) {
        m.nodes[i] = palloc(&a, sizeof *m.nodes[i]);
        ok = m.nodes[i] && node_msg(&a, p, &p->nodes[i], m.nodes[i]);
    }
    m.n_values = (size_t)p->nvalues;
    m.values = palloc(&a, sizeof *m.values * (size_t)(p->nvalues + 1));
    ok = ok && m.values;
    for (int i = 0; ok && i < p->nvalues; i++) {
        Rsplan__Value *v = palloc(&a, sizeof *v);
        if (!(ok = v != NULL)) break;
        rsplan__value__init(v);
        v->numel = p->values[i].numel;
        v->alias = p->values[i].alias;
        v->offset = p->values[i].offset;
        v->has_layout = v->has_padded = true;
        v->layout = p->values[i].layout;
        v->padded = p->values[i].padded;
        m.values[i] = v;
    }
    m.n_tensors = (size_t)p->ntensors;
    m.tensors = palloc(&a, sizeof *m.tensors * (size_t)(p->ntensors + 1));
    ok = ok && m.tensors;
    for (int i = 0; ok && i < p->ntensors; i++) {
        const rs_ptensor *t = &p->tensors[i];
        Rsplan__Tensor *x = palloc(&a, sizeof *x);
        if (!(ok = x != NULL)) break;
        rsplan__tensor__init(x);
        x->name = (char *)t->name;
        x->n_dims = (size_t)t->ndim;
        x->dims = (int64_t *)t->dims;
        x->dtype = t->dtype;
        x->layout = t->layout;
        x->data.len = t->bytes;
        x->data.data = t->data;
        m.tensors[i] = x;
    }
    m.n_fusions = (size_t)p->nfusions;
    m.fusions = palloc(&a, sizeof *m.fusions * (size_t)(p->nfusions + 1));
    ok = ok && m.fusions;
    for (int i = 0; ok && i < p->nfusions; i++) m.fusions[i] = (char *)p->fusions[i];
    if (!ok) {
        pool_clear(&a);
        return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory writing the plan");
    }
    size_t len = rsplan__plan__get_packed_size(&m);
    uint8_t *out = malloc(HEADER + len); /* the caller's */
    if (!out) {
        pool_clear(&a);
        return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory writing the plan (%zu bytes)", len);
    }
    rsplan__plan__pack(&m, out + HEADER);
    pool_clear(&a);
    memcpy(out, MAGIC, 8);
    put32(out + 8, RS_PLAN_FORMAT_VERSION);
    put32(out + 12, (uint32_t)crc32(0L, out + HEADER, (uInt)len));
    put64(out + 16, len);
    *buf = out;
    *n = HEADER + len;
    return RS_OK;
}

rs_status rs_plan_save(const rs_plan *p, const char *path, rs_err *err)
{
    uint8_t *buf;
    size_t n;
    rs_status st = rs_plan_serialize(p, &buf, &n, err);
    if (st) return st;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(buf);
        return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    }
    bool ok = fwrite(buf, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    free(buf);
    if (!ok) return rs_err_set(err, RS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return RS_OK;
}

/* ---- reading ---- */

static rs_status read_dims(const Rsplan__Dims *m, rs_dims *d, const char *name, rs_err *err)
{
    if (!m || m->n_d > RS_DIMS_MAX)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: a shape with more than %d dims or none", name, RS_DIMS_MAX);
    d->rank = (int)m->n_d;
    for (int i = 0; i < d->rank; i++) d->d[i] = m->d[i];
    return RS_OK;
}

static rs_status read_node(const char *name, const Rsplan__Node *m, rs_pnode *n, rs_err *err)
{
    *n = rs_pnode_empty((rs_pk)m->kind, m->name ? m->name : "");
    if (m->kind < 0 || m->kind >= RS_PK_VIEW)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' has kind %d, which no plan holds", name, n->name, m->kind);
    if (m->n_inputs < 1 || m->n_inputs > RS_OP_MAX_IN || (m->n_const_inputs && m->n_const_inputs != m->n_inputs) ||
        m->n_geom != 12 || m->n_post > RS_PLAN_MAX_POST || m->n_in_dims > RS_OP_MAX_IN)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' has a malformed list (inputs, geometry, post-ops)", name,
                          n->name);
    n->kind = (rs_pk)m->kind;
    n->nin = (int)m->n_inputs;
    for (int i = 0; i < n->nin; i++) {
        n->in[i] = m->inputs[i];
        n->cin[i] = m->n_const_inputs ? m->const_inputs[i] : -1;
    }
    n->out = m->output;
    n->prec = (rs_plan_prec)m->precision;
    const int32_t *g = m->geom;
    n->g = (rs_conv_geom){.c = g[0], .h = g[1], .w = g[2], .oc = g[3], .kh = g[4], .kw = g[5], .sh = g[6], .sw = g[7],
                          .ph = g[8], .pw = g[9], .oh = g[10], .ow = g[11]};
    n->I = m->in_features;
    n->O = m->out_features;
    n->rows = m->rows;
    n->w = m->has_weight ? m->weight : -1;
    n->b = m->has_bias ? m->bias : -1;
    n->tmp = m->has_tmp ? m->tmp : -1;
    n->npost = (int)m->n_post;
    for (int j = 0; j < n->npost; j++) {
        const Rsplan__PostOp *q = m->post[j];
        n->post[j] = (rs_ppost){.kind = (rs_ppost_kind)q->kind, .op = q->op, .alpha = q->alpha, .beta = q->beta,
                                .value = q->has_value ? q->value : -1};
    }
    n->qscale = m->qscale;
    n->oscales = m->has_oscales ? m->oscales : -1;
    n->alg = m->has_conv_alg ? m->conv_alg : RS_PCONV_DIRECT;
    n->alg1 = m->has_conv_alg_1 ? m->conv_alg_1 : RS_PCONV_DIRECT;
    n->group = m->has_group ? m->group : 1;
    snprintf(n->impl, sizeof n->impl, "%s", m->impl ? m->impl : "");
    n->avg_exclude = m->has_avg_exclude && m->avg_exclude;
    n->act = m->act;
    n->alpha = m->alpha;
    n->beta = m->beta;
    n->eps = m->eps;
    n->T = m->t;
    n->C = m->c;
    n->V = m->v;
    n->heads = m->heads;
    if (n->kind == RS_PK_OP) {
        n->op = (rs_op)m->op;
        n->a.eps = n->eps; /* LayerNormalization's, kept in the node's own eps */
        if (m->attrs) {
            n->a.sub = m->attrs->sub;
            n->a.axis = m->attrs->axis;
            n->a.legacy_softmax = m->attrs->legacy_softmax;
            n->a.alpha = m->attrs->alpha;
            n->a.beta = m->attrs->beta;
            if (m->attrs->n_perm > RS_DIMS_MAX)
                return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' has a permutation of %zu dims", name, n->name,
                                  m->attrs->n_perm);
            for (size_t i = 0; i < m->attrs->n_perm; i++) n->a.perm[i] = m->attrs->perm[i];
            for (size_t i = m->attrs->n_perm; i < RS_DIMS_MAX; i++) n->a.perm[i] = -1;
            if (m->attrs->n_starts > RS_DIMS_MAX || m->attrs->n_steps != m->attrs->n_starts)
                return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' has a slice of %zu starts and %zu steps", name,
                                  n->name, m->attrs->n_starts, m->attrs->n_steps);
            for (size_t i = 0; i < m->attrs->n_starts; i++) {
                n->a.starts[i] = m->attrs->starts[i];
                n->a.steps[i] = m->attrs->steps[i];
            }
            if (m->attrs->shape) {
                rs_status st = read_dims(m->attrs->shape, &n->a.shape, name, err);
                if (st) return st;
            }
            n->a.axes_mask = m->attrs->axes_mask;
            n->a.keepdims = m->attrs->keepdims;
        }
        if (m->n_in_dims != (size_t)n->nin)
            return rs_err_set(err, RS_ERR_FORMAT, "%s: node '%s' has %zu input shapes for %d inputs", name, n->name,
                              m->n_in_dims, n->nin);
        for (int i = 0; i < n->nin; i++) {
            rs_status st = read_dims(m->in_dims[i], &n->ds[i], name, err);
            if (st) return st;
        }
        rs_status st = read_dims(m->out_dims, &n->dout, name, err);
        if (st) return st;
    }
    return RS_OK;
}

static rs_status from_msg(const char *name, const Rsplan__Plan *m, rs_plan *p, rs_err *err)
{
    char isa[32], ver[24];
    rs_plan_dnnl_isa(isa, sizeof isa);
    rs_plan_dnnl_version(ver, sizeof ver);
    if (m->format_version != RS_PLAN_FORMAT_VERSION)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: plan format version %u; this ringside reads version %d: compile the model again", name,
                          m->format_version, RS_PLAN_FORMAT_VERSION);
    if (!strcmp(m->device, "cuda")) {
        /* no ISA or oneDNN to match: the GPU and the libraries are checked when the plan is opened */
        int sm = 0;
        char tail = 0;
        if (!m->cuda_target || sscanf(m->cuda_target, "sm_%d%c", &sm, &tail) != 1 || sm < 10 || sm > 999 ||
            !m->cudnn_version || !m->cublaslt_version)
            return rs_err_set(err, RS_ERR_FORMAT, "%s: a cuda plan without a valid target (compute capability '%s'); "
                              "compile the model again", name, m->cuda_target ? m->cuda_target : "");
        p->dev = RS_PLAN_DEV_CUDA;
        snprintf(p->cuda_target, sizeof p->cuda_target, "%s", m->cuda_target);
        snprintf(p->cudnn_version, sizeof p->cudnn_version, "%s", m->cudnn_version);
        snprintf(p->cublaslt_version, sizeof p->cublaslt_version, "%s", m->cublaslt_version);
    } else if (strcmp(m->device, "cpu")) {
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "%s: built for device '%s'; plans are for the cpu or cuda "
                          "(compile ... device=cpu|cuda)", name, m->device);
    } else if (strcmp(m->isa, isa))
        return rs_err_set(err, RS_ERR_UNSUPPORTED,
                          "%s: built for ISA %s, but oneDNN runs %s on this CPU: its weights are laid out for the "
                          "other one's kernels; compile the model again here (`compile MODEL -> %s` on this machine "
                          "makes a plan for %s)",
                          name, m->isa, isa, name, isa);
    else if (strcmp(m->dnnl_version, ver))
        return rs_err_set(err, RS_ERR_UNSUPPORTED,
                          "%s: built with oneDNN %s, this ringside has %s (weight layouts may differ); compile the "
                          "model again here",
                          name, m->dnnl_version, ver);
    if (m->n_input_shape < 1 || m->n_input_shape > RS_MAX_DIMS)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: an input of %zu dims", name, m->n_input_shape);
    p->prec = (rs_plan_prec)m->precision;
    p->batch = m->batch;
    snprintf(p->isa, sizeof p->isa, "%s", m->isa);
    snprintf(p->dnnl_version, sizeof p->dnnl_version, "%s", m->dnnl_version);
    snprintf(p->device, sizeof p->device, "%s", m->device);
    snprintf(p->source, sizeof p->source, "%s", m->source ? m->source : "");
    p->tokens = m->tokens;
    p->in.ndim = (int)m->n_input_shape;
    for (int i = 0; i < p->in.ndim; i++) p->in.d[i] = m->input_shape[i];
    p->classes = m->classes;
    p->rows = m->rows;
    p->vocab = m->vocab;
    p->output = m->output;
    p->arena_bytes = m->arena_bytes;
    p->scratch_off = m->scratch_offset;
    p->scratch_bytes = m->scratch_bytes;
    p->naive_bytes = m->naive_bytes;
    p->nodes_before = m->nodes_before;
    p->views_removed = m->views_removed;
    p->build_s = m->build_seconds;
    p->build_threads = m->has_build_threads ? m->build_threads : 1;
    if (p->build_threads < 1 || p->build_threads > 1024)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: built with %d threads", name, p->build_threads);
    for (size_t i = 0; i < m->n_values; i++) {
        int v = rs_plan_add_value(p, m->values[i]->numel);
        if (v < 0) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", name);
        p->values[v].alias = m->values[i]->alias;
        p->values[v].offset = m->values[i]->offset;
        p->values[v].layout = m->values[i]->layout;
        p->values[v].padded = m->values[i]->padded;
    }
    for (size_t i = 0; i < m->n_tensors; i++) {
        const Rsplan__Tensor *t = m->tensors[i];
        if (t->n_dims < 1 || t->n_dims > 4)
            return rs_err_set(err, RS_ERR_FORMAT, "%s: tensor %zu has %zu dims", name, i, t->n_dims);
        int64_t one = 1;
        int k = rs_plan_add_tensor(p, t->name, 1, &one, NULL);
        if (k < 0) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", name);
        rs_ptensor *x = &p->tensors[k];
        x->ndim = (int)t->n_dims;
        for (int j = 0; j < x->ndim; j++) x->dims[j] = t->dims[j];
        void *data = rs_plan_aligned_alloc(t->data.len);
        if (!data) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for tensor %s", name, x->name);
        if (t->data.len) memcpy(data, t->data.data, t->data.len);
        rs_plan_tensor_replace(x, (rs_dtype)t->dtype, t->layout, data, t->data.len);
    }
    for (size_t i = 0; i < m->n_nodes; i++) {
        rs_pnode n;
        rs_status st = read_node(name, m->nodes[i], &n, err);
        if (st) return st;
        if (rs_plan_add_node(p, &n) < 0) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", name);
    }
    p->nfusions = 0;
    if (m->n_fusions) {
        p->fusions = calloc(m->n_fusions, sizeof *p->fusions);
        if (!p->fusions) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", name);
        for (size_t i = 0; i < m->n_fusions; i++) snprintf(p->fusions[i], sizeof p->fusions[i], "%s", m->fusions[i]);
        p->nfusions = (int)m->n_fusions;
    }
    return RS_OK;
}

/* run false: a plan this machine cannot run is read without its runtime (rs_plan_inspect) */
static rs_status load(const uint8_t *buf, size_t n, const char *name, bool run, rs_plan **out, rs_err *err)
{
    *out = NULL;
    if (n < HEADER || memcmp(buf, MAGIC, 8))
        return rs_err_set(err, RS_ERR_FORMAT, "%s: not a plan file (no RINGPLAN header); `compile` writes them", name);
    uint32_t ver = get32(buf + 8);
    if (ver != RS_PLAN_FORMAT_VERSION)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: plan format version %u; this ringside reads version %d: compile the model again", name,
                          ver, RS_PLAN_FORMAT_VERSION);
    uint64_t len = get64(buf + 16);
    if (len != n - HEADER)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: truncated or padded: the header says %llu bytes of plan, the file has %zu",
                          name, (unsigned long long)len, n - HEADER);
    if ((uint32_t)crc32(0L, buf + HEADER, (uInt)len) != get32(buf + 12))
        return rs_err_set(err, RS_ERR_FORMAT, "%s: corrupted: the checksum of its %llu bytes does not match", name,
                          (unsigned long long)len);
    Rsplan__Plan *m = rsplan__plan__unpack(NULL, (size_t)len, buf + HEADER);
    if (!m) return rs_err_set(err, RS_ERR_FORMAT, "%s: the plan message does not parse", name);
    rs_plan *p = calloc(1, sizeof *p);
    if (!p) {
        rsplan__plan__free_unpacked(m, NULL);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", name);
    }
    rs_status st = from_msg(name, m, p, err);
    p->threads = p->build_threads;
    rsplan__plan__free_unpacked(m, NULL);
    bool named = st != RS_OK; /* from_msg's messages name the file; the checks below do not */
    if (!st) st = rs_plan_validate(p, err);
    if (!st) st = rs_plan_liveness(p, err);
    if (!st) st = rs_plan_check_memory(p, err);
    if (!st && (run || p->dev == RS_PLAN_DEV_CPU)) st = rs_plan_open_runtime(p, err);
    else if (!st && p->dev == RS_PLAN_DEV_CUDA) { /* show what it holds, and where it can, what it runs */
        rs_err quiet = {0};
        rs_plan_cuda_open(p, &quiet);
    }
    if (st) {
        if (!named) rs_err_prefix(err, "%s", name);
        rs_plan_free(p);
        return st;
    }
    *out = p;
    return RS_OK;
}

rs_status rs_plan_load_buffer(const uint8_t *buf, size_t n, const char *name, rs_plan **out, rs_err *err)
{
    return load(buf, n, name, true, out, err);
}

rs_status rs_plan_inspect_buffer(const uint8_t *buf, size_t n, const char *name, rs_plan **out, rs_err *err)
{
    return load(buf, n, name, false, out, err);
}

static rs_status load_file(const char *path, bool run, rs_plan **out, rs_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return rs_err_set(err, RS_ERR_IO, "%s: cannot seek", path);
    }
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz < 0 || (size_t)sz > MAX_FILE) {
        fclose(f);
        return rs_err_set(err, RS_ERR_FORMAT, "%s: %ld bytes is not a plan file's size", path, sz);
    }
    uint8_t *buf = malloc((size_t)sz + 1); /* owned here */
    if (!buf) {
        fclose(f);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    rs_status st = got == (size_t)sz ? load(buf, got, path, run, out, err)
                                     : rs_err_set(err, RS_ERR_IO, "%s: read failed", path);
    free(buf);
    return st;
}

rs_status rs_plan_load(const char *path, rs_plan **out, rs_err *err) { return load_file(path, true, out, err); }
rs_status rs_plan_inspect(const char *path, rs_plan **out, rs_err *err) { return load_file(path, false, out, err); }
