/* The host half of plans for a GPU, built in every build (no CUDA headers): compile's last step for a
 * cuda plan, and how a conv or inner product of one applies its post-ops, which the runtime
 * (cuda.c) follows and `plan show` reports on machines without a GPU. */
#include <stdint.h>
#include <string.h>

/* amp_bf16_bits: the engine's one fp32 -> bf16 rounding (to nearest even), so a bf16 plan's weights
 * hold the values the engine's bf16 products would use */
#include "engine/cpu/amp.h"
#include "ir.h"

rs_status rs_plan_cuda_finalize(rs_plan *p, rs_err *err)
{
    for (int i = 0; i < p->nnodes; i++) {
        rs_pnode *n = &p->nodes[i];
        if (n->kind != RS_PK_CONV && n->kind != RS_PK_LINEAR) continue;
        if (n->kind == RS_PK_CONV && n->group > 1) /* cuda.c sets no group count on its descriptors */
            return rs_err_set(err, RS_ERR_UNSUPPORTED,
                              "compile: node %s is a convolution of %d groups, which cuda plans do not run yet; "
                              "compile it with device=cpu", n->name, n->group);
        n->alg = n->alg1 = RS_PCONV_DIRECT; /* cuDNN picks its algorithm when the plan is opened */
        if (n->prec != RS_PLAN_BF16) continue;
        rs_ptensor *t = &p->tensors[n->w];
        if (t->dtype != RS_F32) continue; /* a tensor two nodes share is converted once */
        size_t count = t->bytes / sizeof(float);
        uint16_t *h = rs_plan_aligned_alloc(count * sizeof *h); /* owned by the tensor once replaced */
        if (!h) return rs_err_set(err, RS_ERR_NOMEM, "compile: out of memory for bf16 weights of %s", n->name);
        const uint32_t *u = t->data;
        for (size_t j = 0; j < count; j++) h[j] = (uint16_t)(amp_bf16_bits(u[j]) >> 16);
        rs_plan_tensor_replace(t, RS_BF16, 0, h, count * sizeof *h);
    }
    return RS_OK;
}

/* Which eltwise post-op the library can apply itself: cuBLASLt's epilogues have relu and GELU in the
 * tanh form (GPT-2's); cuDNN's fused convolution (cudnnConvolutionBiasActivationForward) has relu,
 * with a bias, on fp32 (TF32 math would be allowed in bf16 nodes, and the fused call does not take
 * its math type from us the same way), and only without a residual before it: its z input would be
 * the output itself. */
static bool library_act(const rs_pnode *n, const rs_ppost *q, int sum)
{
    if (q->kind != RS_PPOST_ELT) return false;
    if (n->kind == RS_PK_LINEAR) return q->op == RS_UNARY_RELU || q->op == RS_UNARY_GELU_TANH;
    return q->op == RS_UNARY_RELU && n->b >= 0 && n->prec == RS_PLAN_FP32 && sum != 0;
}

rs_pcuda_epi rs_plan_cuda_epilogue(const rs_pnode *n)
{
    rs_pcuda_epi e = {.sum = -1, .fused = -1, .via_tmp = false};
    for (int j = 0; j < n->npost; j++)
        if (n->post[j].kind == RS_PPOST_SUM && e.sum < 0) e.sum = j;
    e.via_tmp = e.sum > 0;
    int c = e.sum == 0 ? 1 : 0;
    if (c < n->npost && c != e.sum && library_act(n, &n->post[c], e.sum)) e.fused = c;
    return e;
}

const char *rs_plan_cuda_impl(const rs_plan *p, int i)
{
    if (i < 0 || i >= p->nnodes) return "";
    const rs_pnode *n = &p->nodes[i];
    rs_pcuda_epi e = rs_plan_cuda_epilogue(n);
    bool gelu = e.fused >= 0 && n->post[e.fused].op == RS_UNARY_GELU_TANH, bias = n->b >= 0;
    switch (n->kind) {
    case RS_PK_CONV:
        if (e.fused >= 0) return "cudnn conv+bias+relu";
        return n->prec == RS_PLAN_BF16 ? "cudnn conv (tf32)" : "cudnn conv";
    case RS_PK_MAXPOOL: return "cudnn maxpool";
    case RS_PK_AVGPOOL: return "cudnn avgpool";
    case RS_PK_LINEAR:
        if (e.fused < 0) return bias ? "cublasLt +bias" : "cublasLt";
        if (gelu) return bias ? "cublasLt +bias_gelu" : "cublasLt +gelu";
        return bias ? "cublasLt +bias_relu" : "cublasLt +relu";
    default: return "engine cuda table";
    }
}
