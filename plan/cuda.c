/* A cuda plan on a GPU: cuDNN for convolutions and pools, cuBLASLt for inner products (bias and
 * relu / tanh-GELU in its epilogue), the engine's CUDA kernel table for everything else (layer norm,
 * attention, embedding, adds, standalone activations, the generic ops), all on one stream of the
 * plan's own. Device memory is two allocations made when the plan is opened: the weights, uploaded
 * once, and one block holding the arena (the compiled memory plan, offsets as in the file), the
 * input's slot (value 0, which on the CPU is the caller's memory), the scratch of post-ops that
 * cannot run in place, and the libraries' workspace. fp32 is exact fp32: convolutions use cuDNN's
 * FMA math and products CUBLAS_COMPUTE_32F, no TF32. Built where meson found CUDA, cuDNN and
 * cuBLASLt; cuda_absent.c answers elsewhere. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "engine/cuda/cuda.h"
#include "ir.h"

/* A workspace larger than this is not asked for: cuDNN and cuBLASLt then pick among the algorithms
 * that fit (they all have one that needs none) */
#define WS_CAP ((size_t)256 << 20)

typedef struct cnode {
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnActivationDescriptor_t act;
    cudnnPoolingDescriptor_t pool;
    cudnnConvolutionFwdAlgo_t algo;
    cublasLtMatmulDesc_t mm;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulHeuristicResult_t heur;
    size_t ws; /* the workspace its algorithm needs at the current batch */
    rs_pcuda_epi epi;
} cnode;

struct rs_pcuda {
    int gpu;
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasLtHandle_t lt;
    rs_kctx ctx;            /* the engine's CUDA table on `stream` */
    void *wmem;             /* weights (fp32 on the device; bf16 tensors widened exactly) */
    size_t wbytes;
    float **tdev;           /* per tensor: its device address in wmem */
    char *mem;              /* arena | input | tmp | workspace, one cudaMalloc */
    size_t mem_bytes, in_off, tmp_off, ws_off, ws_bytes;
    float *host_out;        /* the output copied back: what rs_plan_run returns */
    cnode *n;
    int B;                  /* the batch the descriptors and algorithms are set for (0: none) */
};

static rs_status cu_err(rs_err *err, const char *what, cudaError_t e)
{
    return rs_err_set(err, e == cudaErrorMemoryAllocation ? RS_ERR_NOMEM : RS_ERR_INTERNAL, "plan (cuda): %s: %s (%s)",
                      what, cudaGetErrorString(e), cudaGetErrorName(e));
}
static rs_status dnn_err(rs_err *err, const char *what, const char *node, cudnnStatus_t s)
{
    return rs_err_set(err, RS_ERR_INTERNAL, "plan (cuda): %s%s%s: cuDNN %s", what, node ? " of node " : "",
                      node ? node : "", cudnnGetErrorString(s));
}
static rs_status lt_err(rs_err *err, const char *what, const char *node, cublasStatus_t s)
{
    return rs_err_set(err, RS_ERR_INTERNAL, "plan (cuda): %s of node %s: cuBLASLt %s", what, node,
                      cublasLtGetStatusString(s));
}
#define CU(what, call)                                                                                 \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) return cu_err(err, (what), e_);                                         \
    } while (0)
#define DNN(what, node, call)                                                                          \
    do {                                                                                               \
        cudnnStatus_t s_ = (call);                                                                     \
        if (s_ != CUDNN_STATUS_SUCCESS) return dnn_err(err, (what), (node), s_);                      \
    } while (0)
#define LT(what, node, call)                                                                           \
    do {                                                                                               \
        cublasStatus_t s_ = (call);                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) return lt_err(err, (what), (node), s_);                      \
    } while (0)

void rs_plan_cuda_target(char *target, size_t nt, char *cudnn, size_t nc, char *lt, size_t nl)
{
    snprintf(target, nt, "sm_%d", RS_PLAN_CUDA_SM);
    size_t v = cudnnGetVersion(); /* the library's, not the header's: no GPU needed */
    snprintf(cudnn, nc, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    size_t l = cublasLtGetVersion();
    snprintf(lt, nl, "%zu.%zu.%zu", l / 10000, l / 100 % 100, l % 100);
}

static float *dev_value(rs_plan *p, int v)
{
    rs_plan_mem m = {p->cu->mem, p->cu->mem + p->cu->in_off, NULL};
    return rs_plan_mem_value(p, &m, v);
}

/* The descriptors and algorithms of every node for batch B, each algorithm the library's first
 * choice among those whose workspace is at most `limit`; *need = the largest workspace chosen. */
static rs_status setup(rs_plan *p, int B, size_t limit, size_t *need, rs_err *err)
{
    struct rs_pcuda *c = p->cu;
    *need = 0;
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        cnode *k = &c->n[i];
        const rs_conv_geom *g = &n->g;
        k->ws = 0;
        if (n->kind == RS_PK_CONV || n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL) {
            bool conv = n->kind == RS_PK_CONV;
            DNN("input descriptor", n->name,
                cudnnSetTensor4dDescriptor(k->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, g->c, g->h, g->w));
            DNN("output descriptor", n->name,
                cudnnSetTensor4dDescriptor(k->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, B, conv ? g->oc : g->c, g->oh, g->ow));
            if (!conv) continue;
            /* fp32: FMA math only (no TF32), so the plan matches the CPU; a bf16 node allows tensor cores,
             * which on fp32 data means TF32 (the legacy API has no fp32-in, bf16-compute mode) */
            cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
            int got = 0;
            DNN("algorithm choice", n->name,
                cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, k->x, k->w, k->conv, k->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                       &got, perf));
            /* the descriptor's math type (describe_nodes) is what the heuristic ranks under */
            int pick = -1;
            for (int a = 0; a < got && pick < 0; a++)
                if (perf[a].status == CUDNN_STATUS_SUCCESS && perf[a].memory <= limit) pick = a;
            if (pick < 0)
                return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan (cuda): cuDNN has no convolution algorithm for node %s "
                                  "at batch %d within %zu bytes of workspace", n->name, B, limit);
            k->algo = perf[pick].algo;
            /* bf16 nodes: the math type the algorithm was judged with, as cuDNN asks; fp32 keeps FMA (an
             * answer of DEFAULT math would permit TF32 on sm_80 and later) */
            if (n->prec == RS_PLAN_BF16)
                DNN("math type", n->name, cudnnSetConvolutionMathType(k->conv, perf[pick].mathType));
            /* the heuristic's figure is an estimate: ask for the exact one */
            DNN("workspace size", n->name,
                cudnnGetConvolutionForwardWorkspaceSize(c->dnn, k->x, k->w, k->conv, k->y, k->algo, &k->ws));
        } else if (n->kind == RS_PK_LINEAR) {
            uint64_t N = (uint64_t)B * (uint64_t)n->rows;
            if (k->lb) cublasLtMatrixLayoutDestroy(k->lb);
            if (k->lc) cublasLtMatrixLayoutDestroy(k->lc);
            k->lb = k->lc = NULL;
            LT("input layout", n->name, cublasLtMatrixLayoutCreate(&k->lb, CUDA_R_32F, (uint64_t)n->I, N, n->I));
            LT("output layout", n->name, cublasLtMatrixLayoutCreate(&k->lc, CUDA_R_32F, (uint64_t)n->O, N, n->O));
            cublasLtMatmulPreference_t pref;
            LT("preference", n->name, cublasLtMatmulPreferenceCreate(&pref));
            cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
                                                                    sizeof limit);
            /* the heuristic assumes 256-byte aligned operands unless told: arena values are 64-byte aligned
             * (memplan.c), so only algorithms that take 16 may be chosen */
            uint32_t align = 16;
            cublasLtMatmulPreferenceAttributes_t al[] = {
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
            for (int a = 0; a < 4 && s == CUBLAS_STATUS_SUCCESS; a++)
                s = cublasLtMatmulPreferenceSetAttribute(pref, al[a], &align, sizeof align);
            int got = 0;
            if (s == CUBLAS_STATUS_SUCCESS)
                s = cublasLtMatmulAlgoGetHeuristic(c->lt, k->mm, k->la, k->lb, k->lc, k->lc, pref, 1, &k->heur, &got);
            cublasLtMatmulPreferenceDestroy(pref);
            if (s != CUBLAS_STATUS_SUCCESS) return lt_err(err, "algorithm choice", n->name, s);
            if (got < 1)
                return rs_err_set(err, RS_ERR_UNSUPPORTED, "plan (cuda): cuBLASLt has no algorithm for node %s (%d > %d, "
                                  "%llu rows)", n->name, n->I, n->O, (unsigned long long)N);
            k->ws = k->heur.workspaceSize;
        }
        if (k->ws > *need) *need = k->ws;
    }
    c->B = B;
    return RS_OK;
}

/* The descriptors that do not change with the batch: filters, convolutions, pools, matmuls. */
static rs_status describe_nodes(rs_plan *p, rs_err *err)
{
    struct rs_pcuda *c = p->cu;
    for (int i = 0; i < p->nnodes; i++) {
        const rs_pnode *n = &p->nodes[i];
        cnode *k = &c->n[i];
        const rs_conv_geom *g = &n->g;
        k->epi = rs_plan_cuda_epilogue(n);
        if (n->kind == RS_PK_CONV || n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL) {
            DNN("descriptor", n->name, cudnnCreateTensorDescriptor(&k->x));
            DNN("descriptor", n->name, cudnnCreateTensorDescriptor(&k->y));
        }
        if (n->kind == RS_PK_CONV) {
            DNN("descriptor", n->name, cudnnCreateFilterDescriptor(&k->w));
            DNN("filter", n->name,
                cudnnSetFilter4dDescriptor(k->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g->oc, g->c, g->kh, g->kw));
            DNN("descriptor", n->name, cudnnCreateConvolutionDescriptor(&k->conv));
            DNN("convolution", n->name,
                cudnnSetConvolution2dDescriptor(k->conv, g->ph, g->pw, g->sh, g->sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
            DNN("math type", n->name,
                cudnnSetConvolutionMathType(k->conv, n->prec == RS_PLAN_BF16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
            if (n->b >= 0) {
                DNN("descriptor", n->name, cudnnCreateTensorDescriptor(&k->bias));
                DNN("bias", n->name, cudnnSetTensor4dDescriptor(k->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, g->oc, 1, 1));
            }
            if (k->epi.fused >= 0) {
                DNN("descriptor", n->name, cudnnCreateActivationDescriptor(&k->act));
                DNN("activation", n->name,
                    cudnnSetActivationDescriptor(k->act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
            }
        } else if (n->kind == RS_PK_MAXPOOL || n->kind == RS_PK_AVGPOOL) {
            DNN("descriptor", n->name, cudnnCreatePoolingDescriptor(&k->pool));
            /* average pools count the padding, as the engine's and the CPU plan's do */
            DNN("pooling", n->name,
                cudnnSetPooling2dDescriptor(k->pool,
                                            n->kind == RS_PK_MAXPOOL ? CUDNN_POOLING_MAX
                                                                     : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                            CUDNN_NOT_PROPAGATE_NAN, g->kh, g->kw, g->ph, g->pw, g->sh, g->sw));
        } else if (n->kind == RS_PK_LINEAR) {
            /* row-major (N, I) x (O, I)^T is column-major D (O, N) = W^T-as-stored (I, O) transposed x X (I, N) */
            cublasComputeType_t ct = n->prec == RS_PLAN_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
            LT("matmul", n->name, cublasLtMatmulDescCreate(&k->mm, ct, CUDA_R_32F));
            cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
            LT("transpose", n->name, cublasLtMatmulDescSetAttribute(k->mm, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
            LT("transpose", n->name, cublasLtMatmulDescSetAttribute(k->mm, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
            bool bias = n->b >= 0;
            int f = k->epi.fused;
            bool gelu = f >= 0 && n->post[f].op == RS_UNARY_GELU_TANH, relu = f >= 0 && !gelu;
            cublasLtEpilogue_t ep = relu   ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                    : gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                           : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
            LT("epilogue", n->name, cublasLtMatmulDescSetAttribute(k->mm, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
            if (bias) {
                const float *b = c->tdev[n->b];
                LT("bias", n->name, cublasLtMatmulDescSetAttribute(k->mm, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b));
            }
            LT("weight layout", n->name, cublasLtMatrixLayoutCreate(&k->la, CUDA_R_32F, (uint64_t)n->I, (uint64_t)n->O, n->I));
        }
    }
    return RS_OK;
}

/* Weights to the device once: one allocation, each tensor at a 256-byte boundary; bf16 tensors are
 * widened on the host (exactly: bf16 is fp32's upper half), so the device multiplies the bf16 values
 * the file holds. */
static rs_status upload(rs_plan *p, rs_err *err)
{
    struct rs_pcuda *c = p->cu;
    size_t total = 0;
    for (int i = 0; i < p->ntensors; i++) {
        const rs_ptensor *t = &p->tensors[i];
        total += (t->bytes / rs_dtype_size(t->dtype) * sizeof(float) + 255) / 256 * 256;
    }
    c->tdev = calloc((size_t)p->ntensors + 1, sizeof *c->tdev);
    if (!c->tdev) return rs_err_set(err, RS_ERR_NOMEM, "plan (cuda): out of memory");
    CU("weights", cudaMalloc(&c->wmem, total ? total : 1));
    c->wbytes = total;
    size_t at = 0;
    for (int i = 0; i < p->ntensors; i++) {
        const rs_ptensor *t = &p->tensors[i];
        size_t count = t->bytes / rs_dtype_size(t->dtype);
        c->tdev[i] = (float *)(void *)((char *)c->wmem + at);
        const void *src = t->data;
        float *wide = NULL; /* owned here */
        if (t->dtype == RS_BF16) {
            const uint16_t *h = t->data;
            if (!(wide = malloc(count * sizeof *wide + 1))) return rs_err_set(err, RS_ERR_NOMEM, "plan (cuda): out of memory");
            for (size_t j = 0; j < count; j++) {
                uint32_t u = (uint32_t)h[j] << 16;
                memcpy(&wide[j], &u, sizeof u);
            }
            src = wide;
        }
        cudaError_t e = count ? cudaMemcpy(c->tdev[i], src, count * sizeof(float), cudaMemcpyHostToDevice) : cudaSuccess;
        free(wide);
        if (e != cudaSuccess) return cu_err(err, "uploading weights", e);
        at += (count * sizeof(float) + 255) / 256 * 256;
    }
    return RS_OK;
}

/* The GPU this plan may run on: GPU 0, of a compute capability at least the plan's target and this
 * build's (its kernels are sm_XY code plus compute_XY PTX, which the driver compiles for newer GPUs
 * but no older one can run). The message says what would work. */
static rs_status pick_gpu(const rs_plan *p, rs_err *err)
{
    rs_cuda_info info;
    rs_cuda_query(&info);
    if (info.count < 1)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "this plan was built for cuda (%s, cuDNN %s); this machine has no GPU: %s; "
                          "compile it with device=cpu", p->cuda_target, p->cudnn_version, info.why);
    rs_cuda_gpu gpu;
    rs_status st = rs_cuda_gpu_info(0, &gpu, err);
    if (st) return st;
    int want = 0;
    if (sscanf(p->cuda_target, "sm_%d", &want) != 1) want = RS_PLAN_CUDA_SM;
    if (want < RS_PLAN_CUDA_SM) want = RS_PLAN_CUDA_SM;
    int have = gpu.cc_major * 10 + gpu.cc_minor;
    if (have < want)
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "this plan was built for cuda %s; GPU 0 (%s) is sm_%d, older than the "
                          "sm_%d this build's CUDA kernels need; compile it with device=cpu", p->cuda_target, gpu.name,
                          have, want);
    return rs_cuda_use(0, err);
}

static rs_status open_gpu(rs_plan *p, rs_err *err)
{
    rs_status st = pick_gpu(p, err);
    if (st) return st;
    struct rs_pcuda *c = calloc(1, sizeof *c); /* owned by p, freed in rs_plan_cuda_close */
    if (!c) return rs_err_set(err, RS_ERR_NOMEM, "plan (cuda): out of memory");
    p->cu = c;
    c->n = calloc((size_t)p->nnodes, sizeof *c->n);
    if (!c->n) return rs_err_set(err, RS_ERR_NOMEM, "plan (cuda): out of memory");
    CU("stream", cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    DNN("handle", NULL, cudnnCreate(&c->dnn));
    DNN("stream", NULL, cudnnSetStream(c->dnn, c->stream));
    LT("handle", "(none)", cublasLtCreate(&c->lt));
    rs_device d = {RS_DEV_CUDA, 0};
    if ((st = rs_kctx_init(&c->ctx, rs_kernels_for(d), 1, err))) return st;
    c->ctx.stream = c->stream;
    if ((st = upload(p, err)) || (st = describe_nodes(p, err))) return st;
    size_t need = 0;
    if ((st = setup(p, p->batch, WS_CAP, &need, err))) return st;
    /* scratch for a product whose eltwise post-op comes before its residual sum: its output's size */
    size_t tmp = 0;
    for (int i = 0; i < p->nnodes; i++)
        if (c->n[i].epi.via_tmp) {
            size_t b = (size_t)p->values[p->nodes[i].out].numel * (size_t)p->batch * sizeof(float);
            if (b > tmp) tmp = b;
        }
    size_t in = (size_t)rs_shape_numel(&p->in) * (size_t)p->batch * 4; /* floats or int32 tokens */
    c->in_off = (p->arena_bytes + 255) / 256 * 256;
    c->tmp_off = c->in_off + (in + 255) / 256 * 256;
    c->ws_off = c->tmp_off + (tmp + 255) / 256 * 256;
    c->ws_bytes = need;
    c->mem_bytes = c->ws_off + need;
    CU("device arena", cudaMalloc((void **)&c->mem, c->mem_bytes));
    c->host_out = malloc((size_t)p->batch * (size_t)p->rows * (size_t)p->classes * sizeof(float));
    if (!c->host_out) return rs_err_set(err, RS_ERR_NOMEM, "plan (cuda): out of memory");
    return RS_OK;
}

rs_status rs_plan_cuda_open(rs_plan *p, rs_err *err)
{
    if (p->cu) return RS_OK;
    rs_status st = open_gpu(p, err);
    if (st) rs_plan_cuda_close(p);
    return st;
}

void rs_plan_cuda_close(rs_plan *p)
{
    struct rs_pcuda *c = p->cu;
    if (!c) return;
    for (int i = 0; c->n && i < p->nnodes; i++) {
        cnode *k = &c->n[i];
        if (k->x) cudnnDestroyTensorDescriptor(k->x);
        if (k->y) cudnnDestroyTensorDescriptor(k->y);
        if (k->bias) cudnnDestroyTensorDescriptor(k->bias);
        if (k->w) cudnnDestroyFilterDescriptor(k->w);
        if (k->conv) cudnnDestroyConvolutionDescriptor(k->conv);
        if (k->act) cudnnDestroyActivationDescriptor(k->act);
        if (k->pool) cudnnDestroyPoolingDescriptor(k->pool);
        if (k->la) cublasLtMatrixLayoutDestroy(k->la);
        if (k->lb) cublasLtMatrixLayoutDestroy(k->lb);
        if (k->lc) cublasLtMatrixLayoutDestroy(k->lc);
        if (k->mm) cublasLtMatmulDescDestroy(k->mm);
    }
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->mem) cudaFree(c->mem);
    if (c->wmem) cudaFree(c->wmem);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->tdev);
    free(c->host_out);
    free(c->n);
    free(c);
    p->cu = NULL;
}

/* The eltwise post-ops the library did not apply, in order, and the sum of a via_tmp product. */
static rs_status finish_post(rs_plan *p, const rs_pnode *n, const cnode *k, float *into, float *out, size_t cnt,
                             rs_err *err)
{
    rs_kctx *x = &p->cu->ctx;
    for (int j = 0; j < n->npost; j++) {
        const rs_ppost *q = &n->post[j];
        rs_status st = RS_OK;
        if (j == k->epi.fused || (j == k->epi.sum && !k->epi.via_tmp)) continue;
        if (j == k->epi.sum) st = x->k->add(x, into, out, out, cnt);
        else st = x->k->unary(x, (rs_unary_op)q->op, k->epi.via_tmp && j < k->epi.sum ? into : out,
                              k->epi.via_tmp && j < k->epi.sum ? into : out, cnt, q->alpha, q->beta);
        if (st) {
            rs_kctx_check(x, err);
            return rs_err_prefix(err, "plan node %s (post-op %d)", n->name, j);
        }
    }
    return RS_OK;
}

static rs_status run_conv(rs_plan *p, int i, int B, rs_err *err)
{
    struct rs_pcuda *c = p->cu;
    const rs_pnode *n = &p->nodes[i];
    cnode *k = &c->n[i];
    float *out = dev_value(p, n->out), *into = k->epi.via_tmp ? (float *)(void *)(c->mem + c->tmp_off) : out;
    const float *in = dev_value(p, n->in[0]);
    void *ws = c->mem + c->ws_off;
    float one = 1, zero = 0, beta = k->epi.sum == 0 ? 1.0f : 0.0f;
    if (n->kind != RS_PK_CONV) {
        DNN("pooling", n->name, cudnnPoolingForward(c->dnn, k->pool, &one, k->x, in, &zero, k->y, out));
        return RS_OK;
    }
    size_t cnt = (size_t)B * (size_t)p->values[n->out].numel;
    cudnnStatus_t s = CUDNN_STATUS_NOT_SUPPORTED;
    if (k->epi.fused >= 0) /* relu(conv + bias), z (alpha2 = 0) not read */
        s = cudnnConvolutionBiasActivationForward(c->dnn, &one, k->x, in, k->w, c->tdev[n->w], k->conv, k->algo, ws, k->ws,
                                                  &zero, k->y, into, k->bias, c->tdev[n->b], k->act, k->y, into);
    if (s == CUDNN_STATUS_NOT_SUPPORTED) { /* unfused (or the fused call declined this algorithm): conv, bias, relu */
        DNN("convolution", n->name,
            cudnnConvolutionForward(c->dnn, &one, k->x, in, k->w, c->tdev[n->w], k->conv, k->algo, ws, k->ws, &beta, k->y,
                                    into));
        if (n->b >= 0) DNN("bias", n->name, cudnnAddTensor(c->dnn, &one, k->bias, c->tdev[n->b], &one, k->y, into));
        if (k->epi.fused >= 0 && c->ctx.k->unary(&c->ctx, RS_UNARY_RELU, into, into, cnt, 0, 0)) {
            rs_kctx_check(&c->ctx, err);
            return rs_err_prefix(err, "plan node %s (relu)", n->name);
        }
    } else if (s != CUDNN_STATUS_SUCCESS) {
        return dnn_err(err, "convolution", n->name, s);
    }
    return finish_post(p, n, k, into, out, cnt, err);
}

static rs_status run_linear(rs_plan *p, int i, int B, rs_err *err)
{
    struct rs_pcuda *c = p->cu;
    const rs_pnode *n = &p->nodes[i];
    cnode *k = &c->n[i];
    float *out = dev_value(p, n->out), *into = k->epi.via_tmp ? (float *)(void *)(c->mem + c->tmp_off) : out;
    float one = 1, beta = k->epi.sum == 0 ? 1.0f : 0.0f;
    /* beta 1: D = epilogue(W x + C + bias) with C = D, the residual already in the output's memory */
    LT("matmul", n->name,
       cublasLtMatmul(c->lt, k->mm, &one, c->tdev[n->w], k->la, dev_value(p, n->in[0]), k->lb, &beta, into, k->lc, into,
                      k->lc, &k->heur.algo, c->mem + c->ws_off, k->ws, c->stream));
    return finish_post(p, n, k, into, out, (size_t)B * (size_t)p->values[n->out].numel, err);
}

static const float *dev_tensor(const rs_plan *p, int t) { return p->cu->tdev[t]; }

static rs_status run_node(rs_plan *p, int i, int B, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    struct rs_pcuda *c = p->cu;
    switch (n->kind) {
    case RS_PK_CONV:
    case RS_PK_MAXPOOL:
    case RS_PK_AVGPOOL: return run_conv(p, i, B, err);
    case RS_PK_LINEAR: return run_linear(p, i, B, err);
    default: break;
    }
    rs_plan_mem m = {c->mem, c->mem + c->in_off, dev_tensor};
    return rs_plan_table_node(p, &c->ctx, &m, n, B, err);
}

rs_status rs_plan_cuda_run(rs_plan *p, const void *x, int B, const float **out, rs_err *err)
{
    rs_status st = rs_plan_cuda_open(p, err);
    if (st) return st;
    struct rs_pcuda *c = p->cu;
    if ((st = rs_cuda_use(c->gpu, err))) return st;
    if (c->B != B) { /* another batch: its descriptors, and algorithms within the workspace there is */
        size_t need;
        if ((st = setup(p, B, c->ws_bytes, &need, err))) {
            c->B = 0;
            return st;
        }
    }
    CU("copying the input", cudaMemcpyAsync(c->mem + c->in_off, x, (size_t)B * (size_t)rs_shape_numel(&p->in) * 4,
                                            cudaMemcpyHostToDevice, c->stream));
    for (int i = 0; i < p->nnodes && !st; i++) {
        double t0 = p->node_s ? rs_plan_now_s() : 0;
        st = run_node(p, i, B, err);
        if (p->node_s) { /* a node's own time: wait for it */
            cudaError_t e = cudaStreamSynchronize(c->stream);
            if (!st && e != cudaSuccess) st = cu_err(err, "running", e);
            p->node_s[i] = rs_plan_now_s() - t0;
        }
    }
    if (st) {
        cudaStreamSynchronize(c->stream);
        return st;
    }
    size_t bytes = (size_t)B * (size_t)p->rows * (size_t)p->classes * sizeof(float);
    CU("copying the output", cudaMemcpyAsync(c->host_out, dev_value(p, p->output), bytes, cudaMemcpyDeviceToHost, c->stream));
    CU("running", cudaStreamSynchronize(c->stream));
    if ((st = rs_kctx_check(&c->ctx, err))) return rs_err_prefix(err, "plan (cuda)");
    *out = c->host_out;
    return RS_OK;
}
