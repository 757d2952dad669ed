/* The plan nodes the engine's kernel table runs (activations, adds, layer norm, the embedding,
 * attention, generic ops) on a context of the plan's: one body for both runtimes, run.c's on host
 * memory and cuda.c's on device memory, which differ only in where the arena, the input and the
 * tensors are (rs_plan_mem). */
#include "engine/core/kernels.h"
#include "ir.h"

float *rs_plan_mem_value(const rs_plan *p, const rs_plan_mem *m, int v)
{
    int r = rs_plan_root(p, v);
    if (r == 0) return (float *)(uintptr_t)m->input;
    return (float *)(void *)(m->arena + p->values[r].offset);
}

/* A generic op with the batch filled in (B for a batched op; one sample at a time for an op whose
 * file fixed the batch), as the engine's op layer runs it. */
static rs_status run_op(const rs_plan *p, rs_kctx *c, const rs_plan_mem *m, const rs_pnode *n, int B, rs_err *err)
{
    bool batched = rs_dims_batch_pos(&n->dout) >= 0;
    int reps = batched ? 1 : B;
    int64_t b = batched ? B : 1;
    rs_dims os = rs_dims_with_batch(&n->dout, b), is[RS_OP_MAX_IN];
    const rs_dims *isp[RS_OP_MAX_IN] = {0};
    for (int i = 0; i < n->nin; i++) {
        is[i] = n->cin[i] >= 0 ? n->ds[i] : rs_dims_with_batch(&n->ds[i], b);
        isp[i] = &is[i];
    }
    float *out = rs_plan_mem_value(p, m, n->out);
    size_t ostep = (size_t)rs_dims_numel(&os, 0);
    /* its scratch value, B samples' worth (each per-sample run reuses all of it) */
    void *ws = n->tmp >= 0 ? rs_plan_mem_value(p, m, n->tmp) : NULL;
    size_t ws_bytes = n->tmp >= 0 ? (size_t)B * (size_t)p->values[n->tmp].numel * sizeof(float) : 0;
    for (int r = 0; r < reps; r++) {
        const float *ins[RS_OP_MAX_IN] = {0};
        for (int i = 0; i < n->nin; i++)
            ins[i] = n->cin[i] >= 0 ? m->tensor(p, n->cin[i])
                                    : rs_plan_mem_value(p, m, n->in[i]) + (size_t)r * (size_t)rs_dims_numel(&is[i], 0);
        rs_status st = rs_op_run(c, n->op, &n->a, ins, isp, out + (size_t)r * ostep, &os, ws, ws_bytes, err);
        if (st) return st;
    }
    return RS_OK;
}

rs_status rs_plan_table_node(const rs_plan *p, rs_kctx *c, const rs_plan_mem *m, const rs_pnode *n, int B, rs_err *err)
{
    if (n->kind == RS_PK_OP) return run_op(p, c, m, n, B, err); /* its first input may be a constant */
    const rs_kernels *k = c->k;
    float *out = rs_plan_mem_value(p, m, n->out);
    const float *in = rs_plan_mem_value(p, m, n->in[0]);
    size_t cnt = (size_t)B * (size_t)p->values[n->out].numel;
    rs_status st = RS_OK;
    switch (n->kind) {
    case RS_PK_ACT: st = k->unary(c, (rs_unary_op)n->act, in, out, cnt, n->alpha, n->beta); break;
    case RS_PK_ADD: st = k->add(c, in, rs_plan_mem_value(p, m, n->in[1]), out, cnt); break;
    case RS_PK_LAYERNORM: {
        /* (a GPU plan's; the CPU's are oneDNN nodes) mean and rstd of each row into the node's
         * scratch value, as the engine's forward keeps them */
        int rows = (int)(cnt / (size_t)n->C);
        float *mr = rs_plan_mem_value(p, m, n->tmp);
        st = k->layernorm_fwd(c, in, m->tensor(p, n->w), m->tensor(p, n->b), out, mr, mr + rows, rows, n->C, n->eps);
        break;
    }
    case RS_PK_EMBED:
        st = k->embed_fwd(c, (const int32_t *)(const void *)in, m->tensor(p, n->w), m->tensor(p, n->b), out, B, n->T,
                          n->C);
        break;
    case RS_PK_ATTN: st = k->attn_fwd(c, in, out, rs_plan_mem_value(p, m, n->tmp), B, n->T, n->C, n->heads); break;
    default: return rs_err_set(err, RS_ERR_INTERNAL, "plan: node %s (%s) cannot run", n->name, rs_pk_name(n->kind));
    }
    if (st) {
        rs_kctx_check(c, err);
        return rs_err_prefix(err, "plan node %s (%s)", n->name, rs_pk_name(n->kind));
    }
    return RS_OK;
}
