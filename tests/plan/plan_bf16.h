/* What a bf16 plan's nodes can be on this CPU, asked of oneDNN the way compile asks it
 * (plan/dnnl_weights.c, bf16_or_fp32): a bf16 primitive descriptor, and a kernel other than the
 * reference one. The tests' bf16 expectations follow the answer, so they hold per ISA: bf16 nodes
 * where oneDNN has them (AVX-512), fp32 nodes and a report saying so where it has none (AVX2). */
#ifndef RS_TESTS_PLAN_BF16_H
#define RS_TESTS_PLAN_BF16_H

#include <dnnl.h>
#include <stdbool.h>
#include <string.h>

#include "plan/ir.h"
#include "plan/plan.h"

/* oneDNN has a non-reference bf16 kernel for a small inner product (conv false: 8 x 64 > 32) or a 3x3
 * convolution over 16 channels (conv true: 8 x 16 x 14 x 14 > 32, layouts "any"). */
static inline bool plan_dnnl_has_bf16(bool conv)
{
    dnnl_engine_t eng;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) return false;
    dnnl_memory_desc_t src, wei, dst;
    dnnl_convolution_desc_t cd;
    dnnl_inner_product_desc_t id;
    const void *op;
    if (conv) {
        dnnl_dims_t s = {8, 16, 14, 14}, w = {32, 16, 3, 3}, d = {8, 32, 14, 14}, st = {1, 1}, pad = {1, 1};
        dnnl_memory_desc_init_by_tag(&src, 4, s, dnnl_bf16, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&wei, 4, w, dnnl_bf16, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&dst, 4, d, dnnl_f32, dnnl_format_tag_any);
        dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei, NULL, &dst,
                                           st, pad, pad);
        op = &cd;
    } else {
        dnnl_dims_t s = {8, 64}, w = {32, 64}, d = {8, 32};
        dnnl_memory_desc_init_by_tag(&src, 2, s, dnnl_bf16, dnnl_nc);
        dnnl_memory_desc_init_by_tag(&wei, 2, w, dnnl_bf16, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&dst, 2, d, dnnl_f32, dnnl_nc);
        dnnl_inner_product_forward_desc_init(&id, dnnl_forward_inference, &src, &wei, NULL, &dst);
        op = &id;
    }
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = NULL;
    bool has = dnnl_primitive_desc_create(&pd, op, NULL, eng, NULL) == dnnl_success &&
               dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
               strncmp(impl, "ref", 3) != 0;
    if (pd) dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(eng);
    return has;
}

/* Nodes of p that run in bf16. */
static inline int plan_bf16_nodes(const rs_plan *p)
{
    int n = 0;
    for (int i = 0; i < p->nnodes; i++) n += p->nodes[i].prec == RS_PLAN_BF16;
    return n;
}

/* Lines of p's report holding needle. */
static inline int plan_report_lines(const rs_plan *p, const char *needle)
{
    rs_plan_stats st;
    rs_plan_get_stats(p, &st);
    int n = 0;
    for (int i = 0; i < st.fusions; i++) n += strstr(rs_plan_fusion(p, i), needle) != NULL;
    return n;
}

#endif
