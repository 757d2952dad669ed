/* Indices that count the samples: Range(0, N, 1) over the batch size N, and what torch's dynamo exporter
 * does with it when it lowers aten.as_strided (convnext's AdaptiveAvgPool2d writes one): the data
 * flattened to (N*S), indices b*S + j made by Mul, Unsqueeze and Adds of constants, one Gather. Such an
 * index is an IV_I value with `bstep` set (sample 0's values; sample b's are those plus b * bstep); it is
 * followed through that arithmetic and ends in the Gather, which reads each sample's own S elements: a
 * Reshape when the picks are the sample in order, a Slice when they are evenly spaced. Anything else it
 * reaches is refused naming the node. */
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

static rs_status refuse(nctx *c, const char *why)
{
    return rs_onnx_fail(c->p, RS_ERR_UNSUPPORTED,
                        "a range over the batch size (torch's as_strided) %s; it imports only as the indices of a "
                        "Gather on the flattened batch, through Mul by a constant, Add, Sub and Unsqueeze",
                        why);
}

rs_status rs_onnx_batch_range(nctx *c, int64_t start, int64_t delta)
{
    if (start != 0 || delta != 1) return refuse(c, "that does not start at 0 in steps of 1");
    c->res = (ival){.kind = IV_I, .shape = {1, {RS_DIM_BATCH}}, .i = malloc(sizeof(int64_t)), .vid = -1, .bstep = 1};
    if (!c->res.i) return rs_onnx_fail(c->p, RS_ERR_NOMEM, "out of memory");
    c->res.i[0] = 0;
    return RS_OK;
}

/* x with its batch dimension as 1: sample 0's values, which the ordinary constant folding takes. */
static ival sample0(const ival *x, int *pos)
{
    ival s = *x;
    *pos = rs_dims_batch_pos(&x->shape);
    s.shape.d[*pos] = 1;
    s.bstep = 0;
    return s;
}

/* Add, Sub, Mul of a batch index and a constant without the batch: sample 0's result, the batch put back
 * where the index's lands after broadcasting, the step carried (Mul by a scalar scales it). */
static rs_status binary(nctx *c)
{
    int sub = c->def->sub, ai = c->in[0]->bstep ? 0 : 1;
    ival *o = c->in[1 - ai];
    if (c->in[1 - ai]->bstep) return refuse(c, "is combined with another");
    if (o->kind != IV_I || rs_dims_batch_pos(&o->shape) >= 0) return refuse(c, "meets a value that is not an integer constant");
    if (sub != RS_BINARY_ADD && sub != RS_BINARY_SUB && sub != RS_BINARY_MUL) return refuse(c, "meets an operator other than Add, Sub, Mul");
    if (sub == RS_BINARY_MUL && rs_dims_numel(&o->shape, 1) != 1) return refuse(c, "is multiplied by more than one number");
    if (llabs(c->in[ai]->bstep) > (1LL << 31) || (sub == RS_BINARY_MUL && llabs(o->i[0]) > (1LL << 31)))
        return refuse(c, "grows past 2^31 a sample");
    int pos;
    ival s = sample0(c->in[ai], &pos), *ins[2];
    ins[ai] = &s;
    ins[1 - ai] = o;
    rs_op_attrs a = {.sub = sub};
    rs_status st = rs_onnx_emit(c, RS_OP_BINARY, &a, ins, 2);
    if (st) return st;
    int at = pos + c->res.shape.rank - s.shape.rank;
    if (c->res.kind != IV_I || c->res.shape.d[at] != 1) return refuse(c, "is broadcast against a dimension of its own");
    c->res.shape.d[at] = RS_DIM_BATCH;
    int64_t step = c->in[ai]->bstep;
    c->res.bstep = sub == RS_BINARY_MUL ? step * o->i[0] : sub == RS_BINARY_SUB && ai == 1 ? -step : step;
    return RS_OK;
}

/* Gather(x, index) with x a computed value the file flattened to (N*S) and index b*S + j, j in [0, S)
 * the same for every sample: each sample's picks from its own S elements. */
static rs_status gather(nctx *c)
{
    ival *x = c->in[0], *ix = c->in[1];
    if (ix->bstep == 0 || x->bstep) return refuse(c, "is the data of a Gather");
    int64_t ax = 0;
    rs_status st = rs_onnx_attr_int(c->p, "axis", &ax);
    if (st) return st;
    if (ax != 0 && ax != -1) return refuse(c, "is gathered along an axis other than the flattened one");
    rs_dims xf = rs_onnx_file_shape(x);
    int64_t S = rs_dims_numel(&x->shape, 1), ni = rs_dims_numel(&ix->shape, 1);
    if (x->kind != IV_DYN || xf.rank != 1 || rs_onnx_batch_factor(xf.d[0]) != S || rs_dims_batch_pos(&x->shape) != 0)
        return refuse(c, "indexes a value that is not the batch flattened into one dimension");
    if (ix->bstep != S || rs_dims_batch_pos(&ix->shape) != 0)
        return refuse(c, "steps by other than one sample's elements, or its samples are not its first dimension");
    int64_t q0 = ix->i[0], step = ni > 1 ? ix->i[1] - ix->i[0] : 1;
    for (int64_t j = 0; j < ni; j++)
        if (ix->i[j] != q0 + j * step || ix->i[j] < 0 || ix->i[j] >= S || step < 1)
            return refuse(c, "picks elements out of order or outside their sample");
    /* (N, S), a Slice of it when the picks are not the whole sample, the index's shape */
    rs_dims flat = {2, {RS_DIM_BATCH, S}}, cut = {2, {RS_DIM_BATCH, ni}};
    st = rs_onnx_reshape_to(c, x, &flat);
    if (st || (q0 == 0 && step == 1 && ni == S)) {
        if (!st) {
            ival v = c->res;
            c->res = (ival){.vid = -1};
            st = rs_onnx_reshape_to(c, &v, &ix->shape);
            rs_onnx_ival_clear(&v);
        }
        return st;
    }
    ival v = c->res, *vp = &v;
    c->res = (ival){.vid = -1};
    rs_op_attrs a = {.shape = cut, .starts = {0, q0}, .steps = {1, step}};
    st = rs_onnx_emit(c, RS_OP_SLICE, &a, &vp, 1);
    rs_onnx_ival_clear(&v);
    if (st) return st;
    v = c->res;
    c->res = (ival){.vid = -1};
    st = rs_onnx_reshape_to(c, &v, &ix->shape);
    rs_onnx_ival_clear(&v);
    return st;
}

rs_status rs_onnx_batch_index_node(nctx *c)
{
    rs_onnx_import_fn h = c->def->import;
    if (h == rs_onnx_h_binary) return c->nin == 2 && c->in[0] && c->in[1] ? binary(c) : refuse(c, "meets a bad node");
    if (h == rs_onnx_h_gather) return c->nin == 2 && c->in[0] && c->in[1] ? gather(c) : refuse(c, "meets a bad node");
    if (h == rs_onnx_h_unsqueeze) {
        int64_t step = c->in[0]->bstep;
        if (c->nin > 1 && c->in[1] && c->in[1]->bstep) return refuse(c, "is an Unsqueeze's axes");
        rs_status st = h(c);
        if (!st && rs_dims_batch_pos(&c->res.shape) < 0) return refuse(c, "loses its batch dimension");
        c->res.bstep = step;
        return st;
    }
    return refuse(c, "reaches an operator other than Mul, Add, Sub, Unsqueeze and Gather");
}
