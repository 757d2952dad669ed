/* Fuzz target for the ONNX importer: any bytes must either be refused with a message and no graph, or
 * import into a graph whose inference model the engine runs (batch 1 or its fixed batch) without
 * touching memory it does not own.
 * Seeds are small valid models built here with protobuf-c: an MLP, the exporters' Shape -> Gather ->
 * Unsqueeze -> Concat -> Reshape chain, a conv/pool chain, a LayerNormalization/Softmax head, and the
 * mask patterns of attention blocks (Split, Range, Mod, Equal, Trilu, Where, Expand, Cast, HardSwish), and
 * a token model (int64 ids, the embedding Gather, the tanh GELU expansion), and two float inputs (packed
 * into one). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "onnx/import.h"
#include "onnx/onnx.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    rs_onnx_graph *g = NULL;
    rs_err e = {0};
    if (rs_onnx_load_buffer(data, size, "fuzz", &g, &e) != RS_OK) {
        if (g || !e.msg[0]) __builtin_trap();
        return 0;
    }
    size_t in = rs_onnx_graph_input_numel(g), out = rs_onnx_graph_output_numel(g);
    int b = g->fixed_batch > 0 ? (int)g->fixed_batch : 1;
    /* run only what is small: the point is memory safety, not throughput */
    size_t acts = 0;
    for (int i = 0; i < g->nvalues; i++) acts += (size_t)rs_dims_numel(&g->values[i].shape, 1);
    rs_model *m = NULL;
    if (in * (size_t)b < (1u << 16) && out * (size_t)b < (1u << 16) && acts < (1u << 18)) {
        /* a graph the importer accepted must become a model the engine runs */
        if (rs_onnx_to_inference_model(g, "fuzz", &m, &e) != RS_OK) __builtin_trap();
        /* one sample of the model: b rows of a file that fixed the batch at b, else one row */
        float *x = calloc(in * (size_t)b + 1, sizeof(float));
        for (size_t i = 0; i < in * (size_t)b; i++) x[i] = (float)((int)(i % 7) - 3) * 0.25f;
        const float *y = NULL;
        if (rs_model_forward(m, x, 1, &y, &e) == RS_OK) {
            volatile float sink = 0.0f; /* every output value is read: ASan sees a short buffer */
            for (size_t i = 0; i < out * (size_t)b; i++) sink += y[i];
            (void)sink;
        }
        free(x);
    }
    rs_model_free(m);
    char *s = rs_onnx_graph_summary(g);
    free(s);
    rs_onnx_graph_free(g);
    return 0;
}

/* ---- seeds ---- */

typedef struct mb {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto op;
    Onnx__OperatorSetIdProto *opp;
    Onnx__NodeProto nodes[16], *np[16];
    Onnx__TensorProto inits[16], *ip[16];
    Onnx__AttributeProto attrs[32], *ap[32];
    int nattr;
    Onnx__ValueInfoProto in, out, *inp, *outp;
    Onnx__TypeProto in_t;
    Onnx__TypeProto__Tensor in_tt;
    Onnx__TensorShapeProto in_s;
    Onnx__TensorShapeProto__Dimension dims[8], *dp[8];
    char *strs[256];
    int nstr;
    float fdata[4096];
    int nf;
} mb;

static void mb_init(mb *b, int64_t opset, const int64_t *in_shape, int rank)
{
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->op);
    b->op.domain = "";
    b->op.version = opset;
    b->op.has_version = 1;
    b->opp = &b->op;
    b->m.n_opset_import = 1;
    b->m.opset_import = &b->opp;
    b->m.ir_version = 8;
    b->m.has_ir_version = 1;
    b->m.graph = &b->g;
    b->g.name = "seed";
    onnx__value_info_proto__init(&b->in);
    onnx__type_proto__init(&b->in_t);
    onnx__type_proto__tensor__init(&b->in_tt);
    onnx__tensor_shape_proto__init(&b->in_s);
    for (int i = 0; i < rank; i++) {
        onnx__tensor_shape_proto__dimension__init(&b->dims[i]);
        if (i == 0) {
            b->dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            b->dims[i].dim_param = "N";
        } else {
            b->dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            b->dims[i].dim_value = in_shape[i];
        }
        b->dp[i] = &b->dims[i];
    }
    b->in_s.n_dim = (size_t)rank;
    b->in_s.dim = b->dp;
    b->in_tt.elem_type = 1;
    b->in_tt.has_elem_type = 1;
    b->in_tt.shape = &b->in_s;
    b->in_t.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->in_t.tensor_type = &b->in_tt;
    b->in.name = "x";
    b->in.type = &b->in_t;
    b->inp = &b->in;
    b->g.n_input = 1;
    b->g.input = &b->inp;
    onnx__value_info_proto__init(&b->out);
    b->out.name = "y";
    b->outp = &b->out;
    b->g.n_output = 1;
    b->g.output = &b->outp;
    b->g.node = b->np;
    b->g.initializer = b->ip;
}

static Onnx__NodeProto *node(mb *b, const char *op, const char *in0, const char *in1, const char *in2, const char *out)
{
    Onnx__NodeProto *n = &b->nodes[b->g.n_node];
    b->np[b->g.n_node++] = n;
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)out;
    const char **ins = malloc(3 * sizeof(char *));
    ins[0] = in0, ins[1] = in1, ins[2] = in2;
    n->n_input = in2 ? 3 : in1 ? 2 : in0 ? 1 : 0;
    n->input = (char **)ins;
    b->strs[b->nstr++] = (char *)ins;
    const char **outs = malloc(sizeof(char *));
    outs[0] = out;
    n->n_output = 1;
    n->output = (char **)outs;
    b->strs[b->nstr++] = (char *)outs;
    return n;
}

static Onnx__AttributeProto *attr(mb *b, Onnx__NodeProto *n, const char *name)
{
    Onnx__AttributeProto *a = &b->attrs[b->nattr];
    b->ap[b->nattr++] = a;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    if (!n->n_attribute) n->attribute = &b->ap[b->nattr - 1];
    n->n_attribute++;
    return a;
}

static void attr_i(mb *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(b, n, name);
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->i = v;
    a->has_i = 1;
}

static void attr_is(mb *b, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k)
{
    Onnx__AttributeProto *a = attr(b, n, name);
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->ints = (int64_t *)v;
    a->n_ints = k;
}

static void init_f(mb *b, const char *name, const int64_t *dims, size_t nd)
{
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    b->ip[b->g.n_initializer++] = t;
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->data_type = 1;
    t->has_data_type = 1;
    t->dims = (int64_t *)dims;
    t->n_dims = nd;
    size_t n = 1;
    for (size_t i = 0; i < nd; i++) n *= (size_t)dims[i];
    t->float_data = &b->fdata[b->nf];
    t->n_float_data = n;
    for (size_t i = 0; i < n; i++) b->fdata[b->nf++] = (float)((int)((i * 7919) % 13) - 6) * 0.1f;
}

static void init_i(mb *b, const char *name, const int64_t *vals, size_t n, const int64_t *dims, size_t nd)
{
    Onnx__TensorProto *t = &b->inits[b->g.n_initializer];
    b->ip[b->g.n_initializer++] = t;
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->data_type = 7;
    t->has_data_type = 1;
    t->dims = (int64_t *)dims;
    t->n_dims = nd;
    t->int64_data = (int64_t *)vals;
    t->n_int64_data = n;
}

static rs_fuzz_seed pack(mb *b)
{
    size_t n = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = malloc(n);
    onnx__model_proto__pack(&b->m, buf);
    for (int i = 0; i < b->nstr; i++) free(b->strs[i]);
    return (rs_fuzz_seed){buf, n};
}

/* nn.MultiheadAttention's batch arithmetic: (4, N, 6) reshaped to (4, N*2, 3) through Shape, Gather,
 * Mul(N, 2), Concat; transposed to (N*2, 4, 3), read back as (N, 4, 6); the last position picked by a
 * Gather on computed data */
static rs_fuzz_seed seed_batch_heads(mb *b)
{
    static const int64_t min[] = {0, 4, 6}, tperm[] = {1, 0, 2}, i1[] = {1}, i2[] = {2}, i0[] = {0}, i4[] = {4};
    static const int64_t i3[] = {3}, back[] = {-1, 4, 6}, three_d[] = {3}, im1[] = {-1}, one_d[] = {1};
    mb_init(b, 17, min, 3);
    attr_is(b, node(b, "Transpose", "x", NULL, NULL, "xt"), "perm", tperm, 3);
    node(b, "Shape", "xt", NULL, NULL, "s");
    attr_i(b, node(b, "Gather", "s", "one", NULL, "n"), "axis", 0);
    node(b, "Mul", "n", "two", NULL, "nh");
    node(b, "Unsqueeze", "nh", "zero1", NULL, "nh1");
    attr_i(b, node(b, "Concat", "four", "nh1", "three", "shape"), "axis", 0);
    node(b, "Reshape", "xt", "shape", NULL, "heads");
    attr_is(b, node(b, "Transpose", "heads", NULL, NULL, "bh"), "perm", tperm, 3);
    attr_i(b, node(b, "Softmax", "bh", NULL, NULL, "sm"), "axis", -1);
    node(b, "Reshape", "sm", "back", NULL, "r");
    attr_i(b, node(b, "Gather", "r", "last", NULL, "y"), "axis", 1);
    init_i(b, "one", i1, 1, NULL, 0), init_i(b, "two", i2, 1, NULL, 0), init_i(b, "zero1", i0, 1, one_d, 1);
    init_i(b, "four", i4, 1, one_d, 1), init_i(b, "three", i3, 1, one_d, 1);
    init_i(b, "back", back, 3, three_d, 1), init_i(b, "last", im1, 1, NULL, 0);
    return pack(b);
}

/* torch's as_strided over the batch (import_strided.c): (N, 3, 2, 2) averaged to (N, 3, 1, 1), flattened,
 * Gather at Range(0, N, 1) * 3 unsqueezed plus arange(3) as (1, 3, 1, 1) */
static rs_fuzz_seed seed_as_strided(mb *b)
{
    static const int64_t in[] = {0, 3, 2, 2}, hw[] = {-1, -2}, two_d[] = {2}, flat[] = {-1}, one_d[] = {1};
    static const int64_t i0[] = {0}, i1[] = {1}, i3[] = {3}, ax[] = {1, 2, 3}, three_d[] = {3};
    static const int64_t ar[] = {0, 1, 2}, ar_d[] = {1, 3, 1, 1};
    mb_init(b, 20, in, 4);
    attr_i(b, node(b, "ReduceMean", "x", "hw", NULL, "m"), "keepdims", 1);
    node(b, "Reshape", "m", "flat", NULL, "f");
    Onnx__NodeProto *sh = node(b, "Shape", "x", NULL, NULL, "s");
    attr_i(b, sh, "start", 0);
    attr_i(b, sh, "end", 1);
    node(b, "Squeeze", "s", NULL, NULL, "n");
    node(b, "Range", "zero", "n", "one", "r");
    node(b, "Mul", "r", "three", NULL, "rs");
    node(b, "Unsqueeze", "rs", "ax", NULL, "ru");
    node(b, "Add", "ru", "ar", NULL, "idx");
    attr_i(b, node(b, "Gather", "f", "idx", NULL, "y"), "axis", 0);
    init_i(b, "hw", hw, 2, two_d, 1), init_i(b, "flat", flat, 1, one_d, 1), init_i(b, "zero", i0, 1, NULL, 0);
    init_i(b, "one", i1, 1, NULL, 0), init_i(b, "three", i3, 1, NULL, 0), init_i(b, "ax", ax, 3, three_d, 1);
    init_i(b, "ar", ar, 3, ar_d, 4);
    return pack(b);
}

/* two float inputs, packed into one by import_inputs.c: x (N, 3, 4) flattened and u (N, 5), each
 * through a Gemm, joined by Concat */
static rs_fuzz_seed seed_two_inputs(mb *b)
{
    static const int64_t in[] = {0, 3, 4}, wx[] = {4, 12}, bx[] = {4}, wu[] = {3, 5};
    static Onnx__ValueInfoProto u, *ins[2];
    static Onnx__TypeProto ut;
    static Onnx__TypeProto__Tensor utt;
    static Onnx__TensorShapeProto us;
    static Onnx__TensorShapeProto__Dimension ud[2], *udp[2];
    mb_init(b, 17, in, 3);
    ud[0] = b->dims[0];
    onnx__tensor_shape_proto__dimension__init(&ud[1]);
    ud[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    ud[1].dim_value = 5;
    udp[0] = &ud[0], udp[1] = &ud[1];
    onnx__tensor_shape_proto__init(&us);
    us.n_dim = 2, us.dim = udp;
    utt = b->in_tt, utt.shape = &us;
    ut = b->in_t, ut.tensor_type = &utt;
    onnx__value_info_proto__init(&u);
    u.name = "u", u.type = &ut;
    ins[0] = &b->in, ins[1] = &u;
    b->g.n_input = 2, b->g.input = ins;
    node(b, "Flatten", "x", NULL, NULL, "f");
    attr_i(b, node(b, "Gemm", "f", "wx", "bx", "hx"), "transB", 1);
    attr_i(b, node(b, "Gemm", "u", "wu", NULL, "hu"), "transB", 1);
    attr_i(b, node(b, "Concat", "hx", "hu", NULL, "y"), "axis", 1);
    init_f(b, "wx", wx, 2), init_f(b, "bx", bx, 1), init_f(b, "wu", wu, 2);
    return pack(b);
}

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    static rs_fuzz_seed s[9];
    static mb b;
    static const int64_t w1[] = {8, 12}, b1[] = {8}, w2[] = {3, 8}, b2[] = {3};
    static const int64_t mlp_in[] = {0, 3, 4};
    mb_init(&b, 13, mlp_in, 3);
    node(&b, "Flatten", "x", NULL, NULL, "f");
    attr_i(&b, node(&b, "Gemm", "f", "w1", "b1", "h"), "transB", 1);
    node(&b, "Relu", "h", NULL, NULL, "r");
    attr_i(&b, node(&b, "Gemm", "r", "w2", "b2", "y"), "transB", 1);
    init_f(&b, "w1", w1, 2), init_f(&b, "b1", b1, 1), init_f(&b, "w2", w2, 2), init_f(&b, "b2", b2, 1);
    s[0] = pack(&b);

    static const int64_t zero[] = {0}, minus1[] = {-1}, one_d[] = {1}, wm[] = {12, 5}, bm[] = {5};
    mb_init(&b, 13, mlp_in, 3);
    node(&b, "Shape", "x", NULL, NULL, "s");
    attr_i(&b, node(&b, "Gather", "s", "zero", NULL, "n"), "axis", 0);
    node(&b, "Unsqueeze", "n", "zero1", NULL, "n1");
    attr_i(&b, node(&b, "Concat", "n1", "m1", NULL, "shape"), "axis", 0);
    node(&b, "Reshape", "x", "shape", NULL, "flat");
    node(&b, "MatMul", "flat", "wm", NULL, "mm");
    node(&b, "Add", "mm", "bm", NULL, "lin");
    node(&b, "Softmax", "lin", NULL, NULL, "y");
    init_i(&b, "zero", zero, 1, NULL, 0), init_i(&b, "zero1", zero, 1, one_d, 1), init_i(&b, "m1", minus1, 1, one_d, 1);
    init_f(&b, "wm", wm, 2), init_f(&b, "bm", bm, 1);
    s[1] = pack(&b);

    static const int64_t cin[] = {0, 2, 6, 6}, k1[] = {3, 2, 3, 3}, kb[] = {3}, ks[] = {3, 3}, pads[] = {1, 1, 1, 1};
    static const int64_t p2[] = {2, 2}, wc[] = {4, 27}, bc[] = {4};
    mb_init(&b, 13, cin, 4);
    Onnx__NodeProto *c = node(&b, "Conv", "x", "k1", "kb", "c");
    attr_is(&b, c, "kernel_shape", ks, 2), attr_is(&b, c, "pads", pads, 4);
    node(&b, "Relu", "c", NULL, NULL, "r");
    Onnx__NodeProto *mp = node(&b, "MaxPool", "r", NULL, NULL, "p");
    attr_is(&b, mp, "kernel_shape", p2, 2), attr_is(&b, mp, "strides", p2, 2);
    node(&b, "Flatten", "p", NULL, NULL, "f");
    attr_i(&b, node(&b, "Gemm", "f", "wc", "bc", "y"), "transB", 1);
    init_f(&b, "k1", k1, 4), init_f(&b, "kb", kb, 1), init_f(&b, "wc", wc, 2), init_f(&b, "bc", bc, 1);
    s[2] = pack(&b);

    static const int64_t lin[] = {0, 5, 6}, g6[] = {6}, perm[] = {0, 2, 1};
    mb_init(&b, 17, lin, 3);
    node(&b, "LayerNormalization", "x", "g", "bb", "ln");
    attr_is(&b, node(&b, "Transpose", "ln", NULL, NULL, "t"), "perm", perm, 3);
    node(&b, "Erf", "t", NULL, NULL, "e");
    node(&b, "Mul", "e", "t", NULL, "m");
    attr_i(&b, node(&b, "Softmax", "m", NULL, NULL, "y"), "axis", 1);
    init_f(&b, "g", g6, 1), init_f(&b, "bb", g6, 1);
    s[3] = pack(&b);

    /* what torch writes for attention masks: Split (two outputs), Range/Mod/Equal folded to a bool
     * mask, Trilu, Where, Expand of a constant, Cast, HardSwish */
    static const int64_t xin[] = {0, 4, 6}, split[] = {2, 4}, two_d[] = {2}, r0[] = {0}, r4[] = {4}, r1[] = {1};
    static const int64_t two[] = {2}, e41[] = {4, 1}, eshape[] = {4, 4}, c1[] = {1};
    mb_init(&b, 14, xin, 3);
    Onnx__NodeProto *sp = node(&b, "Split", "x", "split", NULL, "a");
    attr_i(&b, sp, "axis", 2);
    const char **souts = malloc(2 * sizeof(char *));
    souts[0] = "a", souts[1] = "bq";
    b.strs[b.nstr++] = (char *)souts;
    sp->output = (char **)souts;
    sp->n_output = 2;
    node(&b, "Range", "r0", "r4", "r1", "pos");
    node(&b, "Mod", "pos", "two", NULL, "odd");
    node(&b, "Equal", "odd", "r0", NULL, "ev");
    attr_i(&b, node(&b, "Trilu", "bq", NULL, NULL, "tri"), "upper", 0);
    node(&b, "Where", "ev", "tri", "c0", "w");
    node(&b, "Expand", "e41", "eshape", NULL, "e");
    node(&b, "Add", "w", "e", NULL, "sum");
    attr_i(&b, node(&b, "Cast", "sum", NULL, NULL, "cf"), "to", 1);
    node(&b, "HardSwish", "cf", NULL, NULL, "h");
    attr_i(&b, node(&b, "Softmax", "h", NULL, NULL, "y"), "axis", -1);
    init_i(&b, "split", split, 2, two_d, 1), init_i(&b, "r0", r0, 1, NULL, 0), init_i(&b, "r4", r4, 1, NULL, 0);
    init_i(&b, "r1", r1, 1, NULL, 0), init_i(&b, "two", two, 1, NULL, 0), init_i(&b, "eshape", eshape, 2, two_d, 1);
    init_f(&b, "e41", e41, 2), init_f(&b, "c0", c1, 0);
    s[4] = pack(&b);

    /* a token model: int64 ids, the embedding Gather + positions, GPT-2's tanh GELU spelled out (the
     * importer makes them the embed and gelu layers) */
    static const int64_t tin[] = {0, 4}, te[] = {11, 6}, tp[] = {4, 6}, scalar[] = {1};
    mb_init(&b, 17, tin, 2);
    b.in_tt.elem_type = 7;
    attr_i(&b, node(&b, "Gather", "te", "x", NULL, "emb"), "axis", 0);
    node(&b, "Add", "emb", "tp", NULL, "h");
    node(&b, "Mul", "h", "h", NULL, "x2");
    node(&b, "Mul", "x2", "h", NULL, "x3");
    node(&b, "Mul", "x3", "ga", NULL, "ax3");
    node(&b, "Add", "ax3", "h", NULL, "inner");
    node(&b, "Mul", "inner", "gk", NULL, "u");
    node(&b, "Tanh", "u", NULL, NULL, "th");
    node(&b, "Add", "th", "one", NULL, "t1");
    node(&b, "Mul", "t1", "h", NULL, "xm");
    node(&b, "Mul", "xm", "half", NULL, "y");
    init_f(&b, "te", te, 2), init_f(&b, "tp", tp, 2);
    static const char *const scal[] = {"ga", "gk", "one", "half"};
    static const float sv[] = {0.044715f, 0.7978845608f, 1.0f, 0.5f};
    for (int i = 0; i < 4; i++) {
        init_f(&b, scal[i], scalar, 0);
        b.fdata[b.nf - 1] = sv[i];
    }
    s[5] = pack(&b);

    s[6] = seed_batch_heads(&b);
    s[7] = seed_as_strided(&b);
    s[8] = seed_two_inputs(&b);
    *seeds = s;
    return 9;
}
