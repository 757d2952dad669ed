/* Inference plans: a model compiled for this machine's CPU, as TensorRT builds an engine.
 * rs_plan_compile takes an engine model (an MLP, a CNN, a GPT, or an imported ONNX graph) and makes
 * an optimized graph: views and dead nodes removed, per-channel scale/shift (a folded BatchNorm)
 * folded into the convolution before it, activations and residual adds fused into the convolution or
 * inner product as oneDNN post-ops; then a memory plan (every value placed in one arena, buffers
 * reused once their value is dead) and weights reordered into the layout and precision (fp32 or bf16)
 * oneDNN chose for this ISA. Convolution, inner product and pooling run as oneDNN primitives; layer
 * norm, attention, embedding, standalone activations and the generic ops run through the engine's
 * CPU kernel table with a context of the plan's own. A plan for a GPU (device=cuda, plan/cuda.c) has
 * the same graph and memory plan with plain weights, and runs on cuDNN, cuBLASLt and the engine's CUDA
 * table.
 *
 * A plan is written to and read from a versioned protobuf-c file (plan/plan.proto) holding the graph,
 * the weights in their final layout, the memory plan and the ISA and oneDNN version it was built for;
 * a file for another ISA or version, truncated or corrupted, is refused with a message. */
#ifndef RS_PLAN_H
#define RS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"
#include "engine/data/dataset.h"
#include "engine/nn/model.h"

typedef enum rs_plan_prec { RS_PLAN_FP32 = 0, RS_PLAN_BF16 = 1, RS_PLAN_INT8 = 2 } rs_plan_prec;
const char *rs_plan_prec_name(rs_plan_prec p); /* "fp32" */
/* The words of compile's options, each indexed by its enum and NULL-terminated: the prompt offers and
 * parses them by index (repl/cmd_plan.c casts the choice to the enum), so a new entry needs no edit
 * in repl/. */
extern const char *const rs_plan_prec_names[];

typedef enum rs_plan_calib_method {
    RS_PLAN_CALIB_MINMAX = 0,
    RS_PLAN_CALIB_PERCENTILE = 1,
    RS_PLAN_CALIB_ENTROPY = 2,
} rs_plan_calib_method;
const char *rs_plan_calib_name(rs_plan_calib_method m); /* "minmax" */
extern const char *const rs_plan_calib_names[];
#define RS_PLAN_CALIB_BINS 2048
/* Adds |x[i]| of n values to hist's bins over [0, amax] (larger ones to the last bin). */
void rs_plan_calib_hist(const float *x, size_t n, float amax, uint64_t *hist, int bins);
/* The clipping threshold the method picks from a histogram of |x| over [0, amax] (min-max: amax;
 * percentile: the bin edge below which pct percent of the counts lie; entropy: the least
 * KL(P || Q) of TensorRT's calibrator). */
float rs_plan_calib_threshold(const uint64_t *hist, int bins, float amax, rs_plan_calib_method m, double pct);

/* Which passes run (all by default): a test turns one off to compare fused with unfused. */
enum {
    RS_PLAN_PASS_FOLD = 1,     /* per-channel scale/shift after a conv folded into its weights */
    RS_PLAN_PASS_ACT = 2,      /* activation after conv/linear -> eltwise post-op */
    RS_PLAN_PASS_RESIDUAL = 4, /* add of a conv/linear result and a dying value -> sum post-op, in place */
    RS_PLAN_PASS_REUSE = 8,    /* memory plan reuses dead values' bytes (off: every value its own) */
    RS_PLAN_PASS_ALL = 15,
};

typedef enum { RS_PLAN_CONV_AUTO = 0, RS_PLAN_CONV_DIRECT, RS_PLAN_CONV_WINOGRAD, RS_PLAN_CONV_SAMPLES } rs_plan_conv_alg;

/* What a plan runs on: this CPU (oneDNN), or a GPU (cuDNN and cuBLASLt, plan/cuda.c). A cuda plan is
 * compiled without a GPU (the graph, memory plan and plain weights need none) and opened where one is. */
typedef enum rs_plan_dev { RS_PLAN_DEV_CPU = 0, RS_PLAN_DEV_CUDA = 1 } rs_plan_dev;
extern const char *const rs_plan_dev_names[];

typedef struct rs_plan_opts {
    rs_plan_prec prec;
    int batch;          /* the largest batch the plan runs (>= 1) */
    int threads;        /* threads per run (>= 1) */
    unsigned passes;    /* RS_PLAN_PASS_* */
    const char *source; /* what it is compiled from, for `plan show` (may be NULL) */
    /* int8: calibration on the first calib_samples samples of calib (0: 512): each int8 node's
     * input scale is 127 / the threshold calib_method picks from what an fp32 plan of the model
     * saw there (min-max: the largest |input|; percentile: calib_percentile percent of |input|
     * below it (0: 99.99); entropy: TensorRT's least KL divergence) */
    const rs_dataset *calib;
    uint32_t calib_samples;
    rs_plan_calib_method calib_method;
    double calib_percentile;
    /* 3x3 stride-1 fp32 convolutions: AUTO times oneDNN's direct and Winograd kernels at the plan's
     * batch (and its batch-1 Winograd kernel run once per sample) and keeps the fastest; DIRECT never
     * tries Winograd; WINOGRAD takes it wherever oneDNN has it; SAMPLES the batch-1 kernel per sample
     * at the plan's batch (the tests' way to get each) */
    rs_plan_conv_alg conv_alg;
    /* bf16 plans, a convolution over an image's few channels (< 4): 0 times its bf16 kernel against
     * fp32 and keeps the faster; 1 takes bf16, -1 fp32 (the tests' way to get each) */
    int image_bf16;
    /* int8 plans: 0 times each int8 convolution and inner product against fp32 at compile and keeps
     * the faster (the report says which, with the times); 1 int8 wherever oneDNN has a kernel for it
     * (the tests' way to get the most int8) */
    int int8_all;
    /* CUDA: fp32 and bf16 only (int8 is refused); weights stay plain row-major, oneDNN's layout
     * choice, Winograd timing and primitives are skipped; the plan records the GPU target and the
     * cuDNN / cuBLASLt versions of this build */
    rs_plan_dev device;
} rs_plan_opts;

rs_plan_opts rs_plan_opts_default(void);

typedef struct rs_plan rs_plan;

/* Compiles built model m (read only; m keeps its weights). Caller owns *out. */
rs_status rs_plan_compile(rs_model *m, const rs_plan_opts *o, rs_plan **out, rs_err *err);
void rs_plan_free(rs_plan *p); /* NULL is a no-op */

/* An ONNX file as an engine model through the importer (plain layers when the graph is a sequence of
 * them, else an inference model), ready for rs_plan_compile. Caller owns *out. */
rs_status rs_plan_model_from_onnx(const char *path, const char *name, rs_model **out, rs_err *err);

/* Runs B samples (1 <= B <= rs_plan_batch): x as rs_model_forward takes it (floats, or int32 token ids
 * for a token model; ids outside the vocabulary are an error). *out (B * rows, classes) points into
 * the plan's arena, valid until the next run. One run at a time per plan. */
rs_status rs_plan_run(rs_plan *p, const void *x, int B, const float **out, rs_err *err);
/* Accuracy and mean cross-entropy on d (as rs_evaluate), in batches of the plan's batch. */
rs_status rs_plan_evaluate(rs_plan *p, const rs_dataset *d, double *acc, double *loss, rs_err *err);

void rs_plan_set_threads(rs_plan *p, int threads);
/* Profiling: from now on every run writes the seconds each node took into s[0 .. node_count) (s is
 * the caller's and must outlive the runs; NULL stops it). rs_plan_node_label says what node i is. */
void rs_plan_time_nodes(rs_plan *p, double *s);
void rs_plan_node_label(const rs_plan *p, int i, char *buf, size_t n); /* "conv.0 (conv, brgconv:avx512_core)" */
int rs_plan_batch(const rs_plan *p);
rs_plan_prec rs_plan_precision(const rs_plan *p);
const rs_shape *rs_plan_input_shape(const rs_plan *p);
bool rs_plan_tokens(const rs_plan *p);
int rs_plan_classes(const rs_plan *p);
int rs_plan_rows(const rs_plan *p);
int rs_plan_vocab(const rs_plan *p);
int rs_plan_node_count(const rs_plan *p);
/* "cpu" or "cuda". */
const char *rs_plan_device(const rs_plan *p);
/* What it was built for, in words: "cuda sm_90, cuDNN 9.19.0, cuBLASLt 13.1.0" or "cpu avx512_core_bf16,
 * oneDNN 2.6.3". */
void rs_plan_target(const rs_plan *p, char *buf, size_t n);

/* What compile did and what the plan holds, as `compile` and `plan show` print it. */
typedef struct rs_plan_stats {
    int nodes_before, nodes_after, views_removed, fusions;
    size_t arena_bytes;      /* with reuse (the activations' peak, scratch included) */
    size_t naive_bytes;      /* every value its own bytes */
    size_t weight_bytes;
    double build_s;
} rs_plan_stats;
void rs_plan_get_stats(const rs_plan *p, rs_plan_stats *st);
/* The fusions in order, one line each ("conv 0 + relu 1"); i < stats.fusions. */
const char *rs_plan_fusion(const rs_plan *p, int i);
/* The plan as text: what it was built for, its nodes (kind, precision, post-ops, arena offset) and
 * its memory plan. Caller frees. */
char *rs_plan_describe(const rs_plan *p);

/* The memory plan's invariant: no two values alive at the same time share a byte, and every value
 * lies inside the arena. RS_OK, or which two overlap. */
rs_status rs_plan_check_memory(const rs_plan *p, rs_err *err);

/* The plan file (plan/plan.proto). Save writes the graph, the weights as they are, the memory plan
 * and the ISA; load refuses a file of another format version, ISA or oneDNN version, a truncated or
 * corrupted one, and one whose graph does not hold together, naming what is wrong. */
rs_status rs_plan_save(const rs_plan *p, const char *path, rs_err *err);
rs_status rs_plan_load(const char *path, rs_plan **out, rs_err *err);
rs_status rs_plan_load_buffer(const uint8_t *buf, size_t n, const char *name, rs_plan **out, rs_err *err);
/* As rs_plan_load, for reading what a plan holds (`plan show`): a cuda plan on a machine that cannot
 * run it (no GPU, or a build without cuDNN) is read and validated but gets no runtime; rs_plan_run on
 * it then answers why. A cpu plan is opened as rs_plan_load opens it. */
rs_status rs_plan_inspect(const char *path, rs_plan **out, rs_err *err);
rs_status rs_plan_inspect_buffer(const uint8_t *buf, size_t n, const char *name, rs_plan **out, rs_err *err);
/* The serialized plan (malloc'd, caller frees). */
rs_status rs_plan_serialize(const rs_plan *p, uint8_t **buf, size_t *n, rs_err *err);

/* 2: fp32 convolutions pick their own input layout, so their weights may take another layout of the
 * same size than a version 1 file's (the loader checks sizes only): version 1 files are refused.
 * 3: an fp32 convolution reads its input in the layout its value holds when oneDNN has a jit kernel
 * for it (the image itself through the nchw "first convolution" kernel), an inner product over a
 * blocked value takes it as a matrix (weights laid out the value's way), and small primitives are
 * made for one thread: weights of the same size in another layout, so version 2 is refused.
 * Plans for a GPU (device "cuda") added optional fields only (cuda_target, cudnn_version,
 * cublaslt_version): a version 3 cpu file of before reads as it did, so the version stays 3. */
#define RS_PLAN_FORMAT_VERSION 3

#endif
