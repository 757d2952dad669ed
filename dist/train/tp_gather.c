/* Whole buffers from a tensor-parallel group's shards (see tp_gather.h). */
#include "tp_gather.h"

rs_status rs_tp_gather_whole(rs_pg *tpg, const rs_tp_plan *plan, const float *src, float *whole, float *stage,
                             rs_dtrain_comm_fn comm, void *comm_ud, int64_t step, rs_err *err)
{
    int t = tpg->rank;
    if (t != 0) {
        double t0 = rs_train_now();
        size_t n = rs_tp_shard_numel(plan, t);
        rs_status st = rs_pg_send(tpg, src, n, RS_F32, 0, err);
        if (comm) comm(comm_ud, step, rs_pg_op_name(RS_OP_SEND), -1, n * sizeof(float), t0, rs_train_now());
        return st;
    }
    rs_tp_place(plan, 0, src, whole);
    for (int r = 1; r < tpg->world; r++) {
        size_t n = rs_tp_shard_numel(plan, r);
        double t0 = rs_train_now();
        rs_status st = rs_pg_recv(tpg, stage, n, RS_F32, r, err);
        if (comm) comm(comm_ud, step, rs_pg_op_name(RS_OP_RECV), -1, n * sizeof(float), t0, rs_train_now());
        if (st) return st;
        rs_tp_place(plan, r, stage, whole);
    }
    return RS_OK;
}

size_t rs_tp_max_shard(const rs_tp_plan *plan)
{
    size_t most = 0;
    for (int r = 0; r < rs_tp_plan_ways(plan); r++)
        if (rs_tp_shard_numel(plan, r) > most) most = rs_tp_shard_numel(plan, r);
    return most;
}
