/* Layers: explicit forward and backward over buffers the model owns.
 * A layer never allocates. It reads its weights at fixed offsets of the model's one parameter
 * buffer, accumulates into the same offsets of the gradient buffer, and computes through the
 * device's kernel table, so the same layer code runs on any device that fills the table. */
#ifndef RS_LAYER_H
#define RS_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/device.h"
#include "engine/core/rng.h"
#include "engine/core/status.h"
#include "engine/core/tensor.h"

typedef enum rs_layer_kind {
#define RS_LAYER(E, ops) RS_LAYER_##E,
#include "engine/nn/layers.def"
#undef RS_LAYER
    RS_LAYER_KIND_COUNT
} rs_layer_kind;

/* What a user writes: `linear(10)`, `conv(16,3,stride=2,pad=1)`, `maxpool(2)`, `dropout(0.1)`. */
typedef struct rs_layer_cfg {
    rs_layer_kind kind;
    int out;              /* linear: out_features; conv: out_channels */
    int kh, kw, sh, sw, ph, pw; /* conv / pool window (stride defaults to kernel for pools) */
    bool bias;            /* linear, conv */
    float p;              /* dropout probability */
    float eps;            /* layernorm */
    int vocab;            /* embed: vocabulary size (its `out` is the width C) */
    int heads;            /* attn */
    bool approx_tanh;     /* gelu: the tanh form of GPT-2 (torch approximate='tanh') */
    float init_std;       /* linear, embed: weights ~ N(0, init_std), biases 0 (GPT-2's init);
                             0 = PyTorch's default for the kind */
    char tie[24];         /* linear: use this parameter ("0.wte") as the weight, shared (tied) */
} rs_layer_cfg;

/* One parameter tensor of a layer: a view {offset, shape} into the model's buffers. */
typedef struct rs_param_slot {
    char suffix[12];      /* "weight", "bias" */
    rs_shape shape;
    size_t offset;        /* in floats, into the model's params/grads buffers */
    size_t numel;
    bool tied;            /* a view of another layer's parameter (weight tying): it owns no range,
                             is no tensor of its own, and its gradient adds into the owner's */
    bool frozen;          /* a constant of an imported graph: read, never trained */
} rs_param_slot;

#define RS_LAYER_MAX_PARAMS 2
/* Inputs of one node: its producers in the model's graph (3: ONNX Where, Concat, Gemm with C). */
#define RS_LAYER_MAX_SRC 8 /* as RS_OP_MAX_IN: a Concat layer reads each of its inputs */

typedef struct rs_layer rs_layer;

/* An all-reduce (sum, in place) of n floats over the ranks holding the other shards of a tensor-
 * parallel model (dist/train/tensor.c supplies it). Layers have no status: a failure is kept by the
 * callback's owner, which reports it after the pass. */
typedef void (*rs_tp_comm_fn)(void *ud, float *buf, size_t n);

/* What a forward/backward call may touch besides its input and output. A layer reads its rs_layer
 * but never writes it during a pass. Layers compute only through k's entries on ctx; they return
 * nothing, so a kernel's failure stays in ctx and the executor checks it after each layer. */
typedef struct rs_exec {
    const rs_kernels *k;
    rs_kctx *ctx;         /* the pass's kernel context (threads, stream, first failure) */
    float *params;        /* model parameter buffer (device) */
    float *grads;         /* model gradient buffer (device) */
    float *ws;            /* the activation set's workspace, at least the largest layer's workspace_bytes */
    size_t ws_bytes;
    void *saved;          /* this layer's saved_bytes(B) in the activation set (NULL if it saves nothing):
                             what forward keeps for backward lives with the pass, not the layer, so
                             several passes can run at once (engine/nn/model.h, activation sets) */
    bool training;
    bool inference;       /* no backward follows (an inference-only model): skip what it would read */
    uint64_t dropout_seed; /* changes every step; each layer mixes in its rng_id */
    rs_tp_comm_fn tp_all_reduce; /* tp_copy / tp_reduce; NULL: a group of one rank (identity) */
    void *tp_ud;
} rs_exec;

/* How tensor parallelism treats a layer (engine/nn/tp.c). Every descriptor says which: 0 is "unset",
 * and the facet test (tests/engine/nn/test_layer_facets.c) fails on it. */
typedef enum rs_layer_tp {
    RS_LAYER_TP_UNSET = 0,
    RS_LAYER_TP_REPLICATE,    /* every rank runs the whole layer */
    RS_LAYER_TP_ELEMENTWISE,  /* runs unchanged on a rank's slice between the two linears of a pair */
    RS_LAYER_TP_HEADS,        /* runs on heads/tp of its heads between the linears of a pair (attn) */
    RS_LAYER_TP_SPLIT,        /* linear: by columns where a pair opens, by rows where it closes */
} rs_layer_tp;

/* A layer's one-position form, for generation with a KV cache (engine/nn/generate.c). */
typedef enum rs_layer_gen {
    RS_LAYER_GEN_UNSET = 0,
    RS_LAYER_GEN_NONE,        /* none: generate recomputes the window per token for a model with it */
    RS_LAYER_GEN_ROW,         /* each row of the last dimension is computed alone: a step is forward
                                 on a one-row view of the layer */
    RS_LAYER_GEN_STEP,        /* its own step() (and cache_floats() when it keeps a cache) */
} rs_layer_gen;

/* What a step is given besides its input and output row. */
typedef struct rs_layer_pos {
    int pos;                  /* the position computed, 0 <= pos < maxT */
    int maxT;                 /* positions a cache holds: the model's context */
    const int32_t *tok;       /* the token at pos (device memory): what an embedding reads */
    float *cache;             /* cache_floats(l, maxT) floats of device memory kept between steps, or NULL */
} rs_layer_pos;

/* One node of an activation's ONNX form where ONNX has no single operator for it: the operator, and
 * whether it also reads the layer's input (SiLU is Sigmoid(x), then Mul of x by that). */
typedef struct rs_layer_onnx_node {
    const char *op;           /* ONNX op_type; NULL ends the list */
    bool times_input;         /* a second input, the layer's input x, beside the previous node's output */
} rs_layer_onnx_node;

/* A layer kind's descriptor: everything the program knows about the kind, in the kind's own file.
 * The parser, completion, help, generation and tensor parallelism read these members; export,
 * import and the plan compiler read the activation facet (unary_of/from_unary) and otherwise
 * switch on the kind for the structural layers whose forms need their builders (docs/add-a-layer.md). */
typedef struct rs_layer_ops {
    /* ---- the command language: engine/nn/spec.c parses with these; completion and help list them ---- */
    const char *kind;         /* spelling in specs and summaries: "linear" */
    const char *synopsis;     /* how errors and help write it: "linear(OUT)"; NULL: the kind alone */
    const char *const *opts;  /* the options it takes, positional ones first (NULL-terminated; NULL: none) */
    int npos;                 /* how many leading options may be given by position */
    const char *word;         /* what completion offers: "linear(" where arguments are usually written,
                                 "relu"; NULL: not offered (tensor parallelism's own layers) */
    bool unspelled;           /* never written in a spec (made by res[ ] or an import) */
    /* The message when c lacks what the kind needs ("linear needs its output size, e.g. linear(10)"),
     * NULL when it is complete. Optional. */
    const char *(*missing)(const rs_layer_cfg *c);
    /* Defaults of the kind besides the common ones (rs_layer_cfg_default). Optional. */
    void (*defaults)(rs_layer_cfg *c);
    /* Writes c as the language spells it (it re-parses to the same). Optional: the kind alone. */
    void (*spell)(const rs_layer_cfg *c, char *buf, size_t n);
    /* An activation's elementwise operator (an rs_unary_op) for c, -1 for any other layer; from_unary
     * sets c for op and says whether op is this kind's. The plan lowers, export writes and import
     * recognises an activation through these, so a new one needs no edit there. Optional. */
    int (*unary_of)(const rs_layer_cfg *c);
    bool (*from_unary)(int op, rs_layer_cfg *c);
    /* The chain of ONNX nodes an activation is written as where ONNX has no operator for it (the
     * exporter writes it, the importer reads it back as this layer); NULL: ONNX spells its operator. */
    const rs_layer_onnx_node *onnx_chain;
    rs_layer_tp tp;
    rs_layer_gen gen;
    /* RS_LAYER_GEN_STEP: the layer at position s->pos, in and out one row (in NULL for the model's
     * tokens); failures stay in x->ctx as in forward. */
    void (*step)(const rs_layer *l, const rs_exec *x, const rs_layer_pos *s, const float *in, float *out);
    size_t (*cache_floats)(const rs_layer *l, int maxT); /* optional: no cache */
    /* A small model that has the layer, for the facet test ("seq in=8 linear(8) silu linear(4)"). */
    const char *example;

    /* ---- the computation ---- */
    /* Output shape from input shape (per sample, no batch), parameter shapes into l->p[]. */
    rs_status (*setup)(rs_layer *l, const rs_shape *in, rs_err *err);
    /* PyTorch's default initialisation, drawing from rng. Optional (no parameters). */
    void (*init)(rs_layer *l, float *params, rs_rng *rng);
    /* Bytes kept from forward for backward besides input and output (argmax, mask, mean/rstd). */
    size_t (*saved_bytes)(const rs_layer *l, int B);
    /* Workspace with ctx's threads (a failed query records itself in ctx and gives 0). */
    size_t (*workspace_bytes)(const rs_layer *l, rs_kctx *ctx, int B);
    void (*forward)(rs_layer *l, const rs_exec *x, const float *in, float *out, int B);
    /* din may be NULL when no gradient is wanted below this layer. */
    void (*backward)(rs_layer *l, const rs_exec *x, const float *in, const float *out,
                     const float *dout, float *din, int B);
    /* Layers of two inputs (nin == 2; add) use these instead of forward/backward; setup gets the
     * first input's shape and the model checks that the second matches (in2 below). da or db may be
     * NULL when that input needs no gradient. */
    int nin;              /* 0 means 1 */
    void (*forward2)(rs_layer *l, const rs_exec *x, const float *a, const float *b, float *out, int B);
    void (*backward2)(rs_layer *l, const rs_exec *x, const float *dout, float *da, float *db, int B);
    /* Layers of any number of inputs (the generic ops) use this instead: in[k] is the output of
     * src[k]. Forward only. */
    void (*forward_n)(rs_layer *l, const rs_exec *x, const float *const *in, float *out, int B);
} rs_layer_ops;

struct rs_op_node;

struct rs_layer {
    const rs_layer_ops *ops;
    rs_layer_cfg cfg;
    char name[48];        /* path in the model, PyTorch-style: "0", "3.1" */
    int index;            /* position in execution order */
    int rng_id;           /* the dropout stream it draws: its index, or in a tensor-parallel shard the
                             index of the whole model's layer it stands for (same masks as one process) */
    rs_shape in, out;     /* per sample */
    int nsrc;             /* inputs: the layers whose outputs this one reads, -1 = the model's input */
    int src[RS_LAYER_MAX_SRC];
    int np;
    rs_param_slot p[RS_LAYER_MAX_PARAMS];
    rs_conv_geom geom;    /* conv and pools */
    struct rs_op_node *op; /* RS_LAYER_OP: what it runs (tensor_op.h), owned by the model */
    bool view;            /* its output is src[0]'s memory under another shape: nothing runs */
    /* share[j].on: slot j is a view of layer share[j].layer's slot share[j].slot (rs_model_share_param:
     * a constant that several nodes of an imported graph read lives once); applied at layout */
    struct {
        bool on;
        int layer, slot;
    } share[RS_LAYER_MAX_PARAMS];
    size_t src_pos;       /* where the layer was written in its spec (for error carets) */
};

const rs_layer_ops *rs_layer_ops_for(rs_layer_kind k);
const char *rs_layer_kind_name(rs_layer_kind k);
/* The kind a spec spells `word` ("linear"), RS_LAYER_KIND_COUNT when none does. */
rs_layer_kind rs_layer_kind_by_name(const char *word);
/* The spellable kinds' names, NULL-terminated, in the registry's order (for near misses). */
const char *const *rs_layer_names(void);
/* What completion offers for the kinds ("linear(", "relu"), NULL-terminated. */
const char *const *rs_layer_words(void);
/* The synopses of the kinds a user writes, "linear(OUT), conv(OUT,K,stride=,pad=), ..., attn(H)". */
const char *rs_layer_synopses(void);
/* The activation kind computing elementwise op (an rs_unary_op), configured into *c; false when no
 * layer computes it. */
bool rs_layer_for_unary(int op, rs_layer_cfg *c);
/* The elementwise op of an activation layer l, -1 for other layers. */
int rs_layer_unary(const rs_layer *l);
/* Default configuration of a kind (bias on, pool stride = kernel, eps 1e-5, p 0.5). */
rs_layer_cfg rs_layer_cfg_default(rs_layer_kind k);
/* Writes the layer as the spec language spells it, e.g. "conv(16,3,pad=1)"; re-parses to the same. */
char *rs_layer_cfg_str(const rs_layer_cfg *c, char *buf, size_t n);
/* Pieces of spellings shared by several kinds: a float in its shortest form that reads back the
 * same, and a window "3,stride=2,pad=1" of conv and the pools (conv's default stride is 1, a pool's
 * its kernel). */
const char *rs_layer_flt(float v, char *buf, size_t n);
void rs_layer_spell_window(const rs_layer_cfg *c, int def_stride, char *buf, size_t n);

/* unary_of and from_unary for an activation that computes one operator whatever its options:
 * RS_LAYER_UNARY_FNS(relu, RS_UNARY_RELU) defines relu_unary and relu_from. */
#define RS_LAYER_UNARY_FNS(prefix, OP)                                                                 \
    static int prefix##_unary(const rs_layer_cfg *c)                                                   \
    {                                                                                                  \
        (void)c;                                                                                       \
        return OP;                                                                                     \
    }                                                                                                  \
    static bool prefix##_from(int op, rs_layer_cfg *c)                                                 \
    {                                                                                                  \
        (void)c;                                                                                       \
        return op == OP;                                                                               \
    }

/* The descriptors (engine/nn/<kind>.c), declared from the one list. */
#define RS_LAYER(E, ops) extern const rs_layer_ops rs_##ops##_ops;
#include "engine/nn/layers.def"
#undef RS_LAYER

/* Shared by conv and pools: output size of a window, or an error naming the layer. */
rs_status rs_layer_window_geom(rs_layer *l, const rs_shape *in, int out_channels, rs_err *err);
/* PyTorch's kaiming_uniform_(a=sqrt(5)) for weights and U(-1/sqrt(fan_in), ..) for biases. */
void rs_layer_init_uniform(float *x, size_t n, float bound, rs_rng *rng);
/* N(0, std) for weights (GPT-2's initialisation). */
void rs_layer_init_normal(float *x, size_t n, float std, rs_rng *rng);
/* Rows of the last dimension in a batch: B * numel(s) / last(s) (tokens x positions for a sequence). */
int64_t rs_layer_rows(const rs_shape *s, int B);

#endif
