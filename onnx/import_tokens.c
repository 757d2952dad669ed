/* Token inputs (see graph.h's `tokens`): a GPT's file takes int64 (or int32) token ids (batch, T), as
 * ringside's exporter and torch.onnx.export write them, and its first step is Gather(embedding table,
 * ids). The engine's token models read int32 ids from their input's 4-byte elements and pick the rows
 * in the embed layer, so that is what the import allows: the ids go to one Gather of a constant
 * (V, C) table along axis 0 (to_model.c makes it the embed layer, with the positions added after it
 * when they are), and any other use of them, which would read the ids' bits as floats, is refused
 * naming the node. */
#include "import_internal.h"

rs_status rs_onnx_token_input(imp *p, const char *name, int elem_type, const rs_dims *s, int64_t fixed)
{
    if (s->rank != 2 || fixed)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "input '%s' has element type %s; integer inputs are token ids of "
                            "shape (batch, T) with a symbolic batch, got rank %d%s", name,
                            rs_onnx_import_dtype_name(elem_type), s->rank, fixed ? " and a fixed batch" : "");
    p->g->tokens = true;
    return RS_OK;
}

bool rs_onnx_reads_tokens(const imp *p, const ival *v)
{
    return p->g->tokens && v && v->kind == IV_DYN && v->vid == p->g->input;
}

rs_status rs_onnx_token_gather(nctx *c, int axis)
{
    imp *p = c->p;
    ival *table = c->in[0], *ids = c->in[1];
    if (!rs_onnx_reads_tokens(p, ids))
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "Gather over computed indices: only the model's token input indexes "
                            "a table (an embedding), not '%s'", c->in_names[1]);
    if (table->kind != IV_F || table->shape.rank != 2 || axis != 0)
        return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "an embedding Gather over the token ids takes a float (V, C) table "
                            "along axis 0");
    for (int k = 0; k < p->g->nnodes; k++)
        if (p->g->nodes[k].op == RS_OP_GATHER)
            return rs_onnx_fail(p, RS_ERR_UNSUPPORTED, "a second Gather over the token ids (node '%s' is the first); "
                                "one embedding table is supported", p->g->nodes[k].name);
    rs_op_attrs a = {.axis = 0};
    return rs_onnx_emit(c, RS_OP_GATHER, &a, c->in, 2);
}
