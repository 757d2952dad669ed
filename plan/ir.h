/* The plan's graph, shared by the files of plan/ (nothing outside plan/ includes it): nodes in run
 * order over values, constants in tensors of their own. build.c makes it from an engine model,
 * passes.c rewrites it, memplan.c places its values in one arena, file.c writes and reads it,
 * dnnl.c and run.c run it. */
#ifndef RS_PLAN_IR_H
#define RS_PLAN_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/train/tune.h"

#include "engine/core/device.h"
#include "engine/core/tensor.h"
#include "engine/nn/tensor_op.h"
#include "plan.h"

/* Node kinds. The first four run as oneDNN primitives; the rest through the engine's CPU table. */
typedef enum rs_pk {
    RS_PK_CONV = 0,  /* 2-d convolution, `group` groups (weights (OC, C / group, KH, KW), bias (OC)) */
    RS_PK_LINEAR,    /* inner product over rows: (rows, I) x (O, I)^T + (O) */
    RS_PK_MAXPOOL,
    RS_PK_AVGPOOL,   /* count_include_pad, as the engine's, unless avg_exclude */
    RS_PK_ACT,       /* an elementwise rs_unary_op (relu, gelu, tanh, ...) with alpha, beta */
    RS_PK_LAYERNORM, /* over the last C of rows */
    RS_PK_EMBED,     /* tokens (T) -> (T, C) */
    RS_PK_ATTN,      /* causal attention core, qkv (T, 3C) -> (T, C) */
    RS_PK_ADD,       /* two values of one size */
    RS_PK_OP,        /* a generic op of an imported graph by the engine's rs_op_run, one that needs no
                        workspace (build.c's generic_op and validate.c's check_op list them) */
    RS_PK_VIEW,      /* its output is its input's memory (flatten, dropout, reshape): removed by the passes */
    RS_PK_COUNT
} rs_pk;

/* A post-op fused into a conv or linear: an elementwise op on its result, or the sum of a value
 * (the residual), in the order they apply. */
typedef enum rs_ppost_kind { RS_PPOST_ELT = 0, RS_PPOST_SUM = 1 } rs_ppost_kind;
typedef struct rs_ppost {
    rs_ppost_kind kind;
    int op;              /* ELT: rs_unary_op */
    float alpha, beta;
    int value;           /* SUM: the value added (its memory is the node's output: computed in place) */
} rs_ppost;

#define RS_PLAN_MAX_POST 4

/* RS_PCONV_SAMPLES: the batch-1 Winograd primitive run once per sample (threads split the samples),
 * where oneDNN's batch-1 kernel (F(2x2, 3x3)) beats what it has for the whole batch */
enum { RS_PCONV_DIRECT = 0, RS_PCONV_WINOGRAD = 1, RS_PCONV_SAMPLES = 2 };

typedef struct rs_pnode {
    rs_pk kind;
    char name[64];       /* the engine layer it came from ("3", "1.2"); fused nodes keep the first's */
    int nin;
    int in[RS_OP_MAX_IN];/* value ids (-1: a constant input of an op, see cin) */
    int out;             /* value id */
    rs_plan_prec prec;   /* what it computes in (oneDNN nodes; the rest are fp32) */
    /* CONV, pools */
    rs_conv_geom g;
    int group;           /* CONV: 1, C for a depthwise convolution, or any divisor of C and OC */
    bool avg_exclude;    /* AVGPOOL: divides by the input's elements under the window (ONNX's
                            count_include_pad = 0), not the whole window's (the engine's layer) */
    /* LINEAR: I inputs, O outputs per row, rows per sample */
    int I, O;
    int64_t rows;
    int w, b;            /* tensor ids of weight and bias, -1: none */
    int npost;
    rs_ppost post[RS_PLAN_MAX_POST];
    /* ACT */
    int act;             /* rs_unary_op */
    float alpha, beta;
    /* LAYERNORM (C = row length), EMBED (T, C, V), ATTN (T, C, heads) */
    float eps;
    int T, C, V, heads;
    int tmp;             /* a value of scratch it needs for the node only (mean/rstd, probabilities), -1 */
    /* int8 (conv, linear): input scale (127 / max |input| in calibration) and the tensor of output
     * scales per channel (1 / (input scale x weight scale)) */
    float qscale;
    int oscales;
    /* CONV: RS_PCONV_DIRECT or RS_PCONV_WINOGRAD (oneDNN's), chosen at compile by timing both at the
     * plan's batch (alg, which may also be RS_PCONV_SAMPLES) and at batch 1 (alg1, for batches nearer
     * 1). alg not direct: the weights stay plain fp32 in the plan, each primitive lays them out its
     * own way */
    int alg, alg1;
    /* CONV with groups (depthwise, grouped): the oneDNN implementation compile timed fastest among
     * those oneDNN offers for its descriptor (dnnl_weights.c), by its name ("jit_dw:avx2"); every
     * primitive of the node takes it where oneDNN offers it for that batch, else oneDNN's first.
     * "" everywhere else: oneDNN's first */
    char impl[48];
    /* OP: the engine's op, its attributes and full shapes (RS_DIM_BATCH at the batch) */
    rs_op op;
    rs_op_attrs a;
    rs_dims ds[RS_OP_MAX_IN], dout;
    int cin[RS_OP_MAX_IN]; /* tensor id of a constant input, -1 when it is a value */
    bool dead;           /* removed by a pass (kept until the graph is compacted) */
} rs_pnode;

typedef struct rs_pvalue {
    int64_t numel;       /* floats per sample */
    int alias;           /* this value is another's memory (a view, an in-place sum): its id; -1 own */
    int64_t offset;      /* bytes into the arena of its memory (roots only); -1 none (the input) */
    int def, last;       /* position of the node that writes it and of the last that reads it (-1: none) */
    int layout;          /* 0 plain row-major; 1 the blocked layout its producer's primitive chose (dnnl.c) */
    int64_t padded;      /* layout 1: floats per sample it takes with the layout's padding (0: numel) */
} rs_pvalue;

typedef struct rs_ptensor {
    char name[64];
    rs_dtype dtype;      /* RS_F32, or RS_BF16 / RS_I8 for weights in a lower precision */
    int ndim;
    int64_t dims[4];
    int layout;          /* 0 plain row-major, 1 the layout oneDNN chose for its node on this ISA */
    size_t bytes;
    void *data;          /* owned, 64-byte aligned */
} rs_ptensor;

struct rs_pdnnl; /* oneDNN's engine, stream and primitives (dnnl.c) */
struct rs_pcuda; /* a cuda plan's GPU runtime: device memory, cuDNN / cuBLASLt handles and descriptors (cuda.c) */

/* Calibration's running record (calib.c): pass 0 keeps per node the largest |input| of a conv or
 * inner product, pass 1 its histogram of |input| over [0, that max]. */
typedef struct rs_pcalib {
    int pass;
    float *amax;   /* (nnodes) */
    uint64_t *hist; /* (nnodes, RS_PLAN_CALIB_BINS), NULL for min-max */
} rs_pcalib;
void rs_plan_calib_observe(rs_pcalib *c, int node, const float *x, size_t n);
/* int8: per node, the threshold of its input the method chose (calib.c; caller frees *thr). */
rs_status rs_plan_calibrate(rs_model *m, const rs_plan_opts *o, float **thr, rs_err *err);

struct rs_plan {
    /* what it was built for */
    rs_plan_prec prec;
    int batch;               /* the largest batch it runs; the memory plan is made for it */
    char isa[32], dnnl_version[24], device[16];
    rs_plan_dev dev;         /* device, parsed */
    char cuda_target[16], cudnn_version[24], cublaslt_version[24]; /* dev CUDA: what it was built for */
    char source[160];        /* what it was compiled from */
    /* the model's interface */
    bool tokens;             /* input: int32 token ids */
    rs_shape in;             /* per sample */
    int classes, rows, vocab;
    /* the graph */
    int nnodes, cap_nodes;
    rs_pnode *nodes;
    int nvalues, cap_values;
    rs_pvalue *values;       /* value 0 is the input */
    int ntensors, cap_tensors;
    rs_ptensor *tensors;
    int output;
    /* the memory plan: one arena; per-primitive scratch at scratch_off (oneDNN's user scratchpads) */
    size_t arena_bytes, scratch_off, scratch_bytes, naive_bytes;
    /* what compile did, for its report and `plan show` */
    int nodes_before, views_removed;
    char (*fusions)[160]; /* one line per rewrite (names cut to 40 characters) */
    int nfusions;
    double build_s;
    /* runtime */
    void *arena;             /* arena_bytes, owned */
    size_t arena_cap;
    int threads;             /* per run (rs_plan_set_threads) */
    int build_threads;       /* what its primitives were first made with (slot 0; the file keeps it) */
    struct rs_pcalib *calib; /* while calibrating: what the products' inputs look like (borrowed) */
    double *node_s;          /* rs_plan_time_nodes: each run writes node i's seconds here (borrowed) */
    rs_kctx ctx;             /* the engine's CPU table for the ops oneDNN does not do; its thread count
                                is the run's (the tuner's choice, at most `threads`) */
    rs_thread_tuner tune;    /* threads > 1: 1 or `threads` per run, whichever runs faster (tune.h) */
    int tune_B;              /* the batch the tuner is timing (0: start again) */
    struct rs_pdnnl *dn;
    struct rs_pcuda *cu;     /* dev CUDA, once opened on a GPU (NULL: not opened, or no GPU here) */
    bool no_runtime;         /* read by rs_plan_inspect where it cannot run: runs answer why */
};

/* ---- graph building (ir.c) ---- */
int rs_plan_add_value(rs_plan *p, int64_t numel);          /* -1 out of memory */
int rs_plan_add_node(rs_plan *p, const rs_pnode *n);       /* -1 out of memory */
/* A tensor of n floats copied from src (NULL: zeros); -1 out of memory. */
int rs_plan_add_tensor(rs_plan *p, const char *name, int ndim, const int64_t *dims, const float *src);
/* Replaces tensor t's data with bytes of dtype/layout (takes ownership of data). */
void rs_plan_tensor_replace(rs_ptensor *t, rs_dtype dtype, int layout, void *data, size_t bytes);
void *rs_plan_aligned_alloc(size_t bytes);
rs_pnode rs_pnode_empty(rs_pk kind, const char *name);
const char *rs_pk_name(rs_pk k);
const char *rs_plan_act_name(int op);
/* The activations oneDNN applies as eltwise post-ops of a conv or inner product (dnnl.c spells them). */
bool rs_plan_fusable_act(int op);
/* A window's padding at the end of a dimension (bottom, right) from its size in, kernel k, stride s,
 * padding at the start and output size: pad where out is the symmetric window's (as the engine's
 * layers have it), else the least end padding that gives out (an imported Conv or pool with pads
 * begin != end, which the geometry keeps as its start pad and its output size); -1 for none. */
int rs_plan_pad_end(int in, int k, int s, int pad, int out);
/* The value whose memory v is (following aliases). */
int rs_plan_root(const rs_plan *p, int v);

/* ---- the parts of compile ---- */
rs_status rs_plan_from_model(rs_plan *p, rs_model *m, rs_err *err);               /* build.c */
rs_status rs_plan_run_passes(rs_plan *p, const rs_plan_opts *o, rs_err *err);     /* passes.c */
/* Appends one line to the compile report's rewrites (p->fusions); a failed allocation loses the line,
 * not the plan. passes.c */
void rs_plan_note(rs_plan *p, const char *line);
/* Monotonic seconds, for build times and timing kernels. run.c */
double rs_plan_now_s(void);
rs_status rs_plan_memplan(rs_plan *p, rs_err *err);                                /* memplan.c */
/* reuse false: every value its own bytes (the figure without reuse, and a test's baseline). */
rs_status rs_plan_memplan_mode(rs_plan *p, bool reuse, rs_err *err);
/* oneDNN's engine and primitives for the plan's batch, the CPU context, the arena (run.c). */
rs_status rs_plan_open_runtime(rs_plan *p, rs_err *err);
rs_status rs_plan_liveness(rs_plan *p, rs_err *err);
/* Checks the shapes and references of a graph read from a file (validate.c). */
rs_status rs_plan_validate(const rs_plan *p, rs_err *err);

/* ---- oneDNN (dnnl.c) ---- */
rs_status rs_plan_dnnl_open(rs_plan *p, rs_err *err);
void rs_plan_dnnl_close(rs_plan *p);
/* The ISA oneDNN runs on this machine ("avx512_core_bf16") and its version ("2.6.3"). */
void rs_plan_dnnl_isa(char *isa, size_t n);
void rs_plan_dnnl_version(char *v, size_t n);
/* After compile: reorders every oneDNN node's weights into the layout (and precision) its primitive
 * chose for the plan's batch. */
rs_status rs_plan_dnnl_finalize_weights(rs_plan *p, const rs_plan_opts *o, rs_err *err);
/* Creates the primitives for batch B (kept for the next run of the same B); sizes their scratch. */
rs_status rs_plan_dnnl_prepare(rs_plan *p, int B, size_t *scratch_bytes, rs_err *err);
rs_status rs_plan_dnnl_exec(rs_plan *p, int node, const void *x, int B, rs_err *err);
/* oneDNN's name for the implementation node i runs (for `plan show`). */
const char *rs_plan_dnnl_impl(const rs_plan *p, int i);
const char *rs_plan_dnnl_impl_ran(const rs_plan *p, int i); /* ... the primitive of its last run */
bool rs_plan_node_is_dnnl(const rs_pnode *n);
rs_status rs_plan_dnnl_sync(rs_plan *p, rs_err *err);

/* ---- CUDA (cuda.c where the build has CUDA, cuDNN and cuBLASLt; cuda_absent.c elsewhere) ---- */
/* What a cuda plan compiled by this build is for: the compute capability the CUDA kernels are built
 * for ("sm_90") and the cuDNN and cuBLASLt versions ("9.19.0"; "none" in a build without them). Needs
 * no GPU. */
void rs_plan_cuda_target(char *target, size_t nt, char *cudnn, size_t nc, char *lt, size_t nl);
/* Compile's last step for a cuda plan, on the host (cuda_compile.c): bf16 nodes' weights rounded to
 * bf16, plain row-major; no scratch in the arena (the runtime sizes cuDNN's workspace at open). */
rs_status rs_plan_cuda_finalize(rs_plan *p, rs_err *err);
/* Opens a cuda plan on GPU 0: its compute capability checked against the plan's target, one device
 * allocation for the arena, the input and the workspace, weights uploaded once, cuDNN descriptors and
 * algorithms for the plan's batch. RS_ERR_UNSUPPORTED with the reason where it cannot run here. */
rs_status rs_plan_cuda_open(rs_plan *p, rs_err *err);
void rs_plan_cuda_close(rs_plan *p);
/* rs_plan_run on the GPU: x (host) copied in, the nodes, the output copied back to a host buffer of
 * the plan's (*out, valid until the next run). */
rs_status rs_plan_cuda_run(rs_plan *p, const void *x, int B, const float **out, rs_err *err);
/* How a conv or linear of a cuda plan applies its post-ops (cuda_compile.c; the runtime follows it):
 * a sum first is the product's beta = 1 into its own output (in place, as on the CPU); the eltwise
 * post-op right after it (or first, without a sum) goes to the library when it has it (fused); an
 * eltwise before the sum sends the product to scratch (via_tmp), then the sum is an add into the
 * output. The other eltwise post-ops run through the engine's CUDA table in order. */
typedef struct rs_pcuda_epi {
    int sum;      /* index of the sum post-op, -1 none */
    int fused;    /* index of the eltwise post-op the library applies, -1 none */
    bool via_tmp; /* an eltwise before the sum */
} rs_pcuda_epi;
rs_pcuda_epi rs_plan_cuda_epilogue(const rs_pnode *n);
/* What node i runs on the GPU ("cudnn conv+bias+relu", "cublasLt +bias_relu", "engine cuda table"). */
const char *rs_plan_cuda_impl(const rs_plan *p, int i);

/* Pointer to value v's memory for batch B (the input: x). */
float *rs_plan_value_ptr(rs_plan *p, int v, const void *x);

/* ---- the engine's kernel table (table.c) ---- */
/* Where a run's memory is: the arena its offsets count from, value 0 (the input), and each tensor's
 * data (host for run.c, device for cuda.c). */
typedef struct rs_plan_mem {
    char *arena;
    const void *input;
    const float *(*tensor)(const rs_plan *p, int t);
} rs_plan_mem;
float *rs_plan_mem_value(const rs_plan *p, const rs_plan_mem *m, int v);
/* Runs node n (not a oneDNN / cuDNN / cuBLASLt one) on context c over memory m at batch B. */
rs_status rs_plan_table_node(const rs_plan *p, rs_kctx *c, const rs_plan_mem *m, const rs_pnode *n, int B, rs_err *err);

#endif
