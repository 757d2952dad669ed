/* What plan/dnnl.c (the runtime: slots, execution), dnnl_layout.c (value layouts, descriptors),
 * dnnl_prim.c (primitive creation) and dnnl_weights.c (the weights laid out at compile, the
 * convolution algorithms timed) share; private to those files. */
#ifndef RS_PLAN_DNNL_INTERNAL_H
#define RS_PLAN_DNNL_INTERNAL_H

#include <dnnl.h>

#include "ir.h"

/* The memory objects one execution of a primitive binds (handles set per run). */
typedef struct rs_pdnnl_mem {
    dnnl_memory_t src, cvt, wei, bias, dst, pad, udst; /* udst: the value's memory when dst_cvt */
} rs_pdnnl_mem;

/* Primitives of one node for one batch size. */
typedef struct rs_pdnnl_prim {
    int B;                        /* 0: not made */
    int nthr;                     /* the OpenMP threads it was made for: oneDNN fixes its work split (and
                                     runs that many threads) when a primitive is created */
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t user_src;  /* f32 plain: what the arena holds */
    dnnl_memory_desc_t src, wei, dst; /* as the primitive takes them */
    dnnl_primitive_t src_cvt;     /* bf16: f32 -> bf16 copy of the input, NULL otherwise */
    /* a conv whose value must stay plain (the engine's ops read it) but which oneDNN runs only as
     * gemm or ref in nchw: it writes its own layout (dst) into the scratch region and this reorder
     * makes the plain value (user_dst); NULL otherwise */
    dnnl_primitive_t dst_cvt;
    dnnl_primitive_t dst_in;      /* with dst_cvt for a residual sum: the residual into dst first */
    dnnl_memory_desc_t user_dst;
    size_t cvt_bytes, dcvt_bytes, pad_bytes; /* the copies' bytes; the primitive's scratchpad */
    void *wei_alt;                /* weights reordered for this batch when its layout differs (owned) */
    rs_pdnnl_mem m;
    /* RS_PCONV_SAMPLES: prim is a batch-1 primitive made for one thread and run once per sample of
     * batch B, by up to nthr threads at a time; thread j > 0 binds tm[j - 1] and its own stream */
    bool each;
    int ntm;
    rs_pdnnl_mem *tm;                     /* ntm = nthr - 1 of them (owned) */
    unsigned long used;           /* when a run last took it (slots 1.. are replaced least recent first) */
    dnnl_primitive_t then;        /* an op node's second primitive, in place on its output (hardsigmoid's clip) */
    int nx;                       /* an op node's inputs after the first (binary's src1, concat's others) */
    dnnl_memory_t *xs;            /* their memory objects (owned) */
    dnnl_status_t why;            /* making it failed: oneDNN's status for its descriptor or a reorder
                                     (dnnl_unimplemented: no kernel for it here); else dnnl_success */
} rs_pdnnl_prim;

/* Primitives kept per node: the plan's batch at its build threads, and the last few other (batch,
 * threads) pairs, so a run that alternates between two (batch 1 and 64, or the thread tuner's 1 and
 * N) does not make them again each time. */
#define RS_PLAN_SLOTS 4

struct rs_pdnnl {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_stream_t *tstrm;         /* per-sample nodes: a stream for each OpenMP thread but the first */
    int ntstrm;
    int n;
    rs_pdnnl_prim (*slot)[RS_PLAN_SLOTS]; /* per node: [0] the plan's batch and build threads, then others */
    int *cur;                     /* per node: the slot of the run under way */
    unsigned long tick;
    dnnl_memory_desc_t *vmd;      /* per value: its blocked layout at the plan's batch (vset[v]) */
    char (*label)[64];            /* per node: the kernel's name as rs_plan_dnnl_impl gives it */
    char *vset;
};

/* err set from a oneDNN status, naming the node (n may be NULL) and what failed; returns the code. */
rs_status rs_pdnnl_fail(rs_err *err, dnnl_status_t s, const char *what, const rs_pnode *n);

/* Returns from the calling function through rs_pdnnl_fail (err and n in scope) when call fails. */
#define DTRY(call, what)                                                                                 \
    do {                                                                                                 \
        dnnl_status_t s_ = (call);                                                                       \
        if (s_ != dnnl_success) return rs_pdnnl_fail(err, s_, what, n);                                          \
    } while (0)

/* dnnl_layout.c */
bool rs_pdnnl_can_block(const rs_plan *p, int v);
/* oneDNN's eltwise algorithm for an rs_unary_op (undef: none), and the alpha it wants. */
dnnl_alg_kind_t rs_pdnnl_elt_alg(int op);
float rs_pdnnl_elt_alpha(const rs_ppost *q);
/* The layout node n reads value v in at batch B: its blocked layout, or plain (nchw / nc by ndims). */
rs_status rs_pdnnl_value_md(rs_plan *p, const rs_pnode *n, int v, int ndims, const dnnl_dims_t dims, int B,
                            dnnl_memory_desc_t *md, rs_err *err);
/* The layout node n writes its output in at batch B ("any" while the plan's batch decides a blocked value). */
rs_status rs_pdnnl_out_md(rs_plan *p, const rs_pnode *n, int B, const dnnl_dims_t dims, dnnl_memory_desc_t *md,
                          rs_err *err);
/* A conv's weights: (OC, C, KH, KW) with one group, else oneDNN's (G, OC / G, C / G, KH, KW), which
 * holds the same floats in the same order (tag: oihw for the plain ones, or any). */
dnnl_status_t rs_pdnnl_conv_wmd(const rs_pnode *n, dnnl_data_type_t dt, bool any, dnnl_memory_desc_t *md);
bool rs_pdnnl_md_with_batch(const dnnl_memory_desc_t *md, int B, dnnl_memory_desc_t *out);
dnnl_dim_t rs_pdnnl_per_sample(const dnnl_memory_desc_t *md);
/* dnnl_prim.c */
rs_status rs_pdnnl_make_prim(rs_plan *p, int i, int B, int alg, rs_pdnnl_prim *d, rs_err *err);
/* The same, handing back oneDNN's status where making it failed at the primitive's descriptor or a
 * reorder of its (dnnl_unimplemented: oneDNN has no kernel for it on this CPU), dnnl_success where it
 * did not or failed elsewhere. */
rs_status rs_pdnnl_make_prim_why(rs_plan *p, int i, int B, int alg, rs_pdnnl_prim *d, dnnl_status_t *why,
                                 rs_err *err);
/* The names of the implementations oneDNN offers for conv node i at batch B on the descriptors
 * rs_pdnnl_make_prim may try (its input's layout or the one it prefers), in oneDNN's order, its
 * reference ones left out: at most max into names, *count of them. */
rs_status rs_pdnnl_impl_names(rs_plan *p, int i, int B, char (*names)[48], int max, int *count, rs_err *err);
/* At the plan's batch, a blocked output's layout as the primitive chose it (dst): the value's from
 * then on, its padded size checked against the file's. */
rs_status rs_pdnnl_keep_out_layout(rs_plan *p, const rs_pnode *n, int B, const dnnl_memory_desc_t *dst, rs_err *err);

/* dnnl_ops.c: the elementwise and concat nodes oneDNN runs in their inputs' layouts */
bool rs_pdnnl_is_op(const rs_pnode *n);
/* Whether op node n may read a blocked value of (C, H, W) chw as its input j, and write a blocked
 * output (its lead input is blocked; a concat's inputs all are, along channels). */
bool rs_pdnnl_op_reads_blocked(const rs_plan *p, const rs_pnode *n, int j, const int64_t *chw);
bool rs_pdnnl_op_writes_blocked(const rs_plan *p, const rs_pnode *n);
rs_status rs_pdnnl_make_op(rs_plan *p, int i, int B, rs_pdnnl_prim *d, rs_err *err);
dnnl_status_t rs_pdnnl_exec_op(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, const void *x, char *scratch);

/* dnnl_move.c: Slice and Transpose as reorders (rs_pdnnl_is_op includes them) */
bool rs_pdnnl_is_move(const rs_pnode *n);
bool rs_pdnnl_move_reads_blocked(const rs_pnode *n, int j, const int64_t *chw);
rs_status rs_pdnnl_make_move(rs_plan *p, int i, int B, rs_pdnnl_prim *d, rs_err *err);
dnnl_status_t rs_pdnnl_exec_move(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, const void *x, char *scratch);

/* dnnl.c */
void rs_pdnnl_free_prim(rs_pdnnl_prim *d);
size_t rs_pdnnl_prim_scratch(const rs_pdnnl_prim *d);
dnnl_status_t rs_pdnnl_exec_prim(rs_plan *p, const rs_pnode *n, rs_pdnnl_prim *d, void *src, void *dst, char *scratch);

/* dnnl_weights.c */
int rs_pdnnl_alg_for(const rs_plan *p, const rs_pnode *n, int B);
rs_status rs_pdnnl_slot_weights(rs_plan *p, int i, rs_pdnnl_prim *d, rs_err *err);

#endif
