/* placeholder: the DDP strategy is being written */
#include "dtrain.h"

rs_status rs_ddp_strategy(rs_pg *g, rs_model *m, const rs_dtrain_cfg *cfg, rs_dtrain_comm_fn comm, void *comm_ud,
                          rs_train_strategy *out, rs_err *err)
{
    (void)g, (void)m, (void)cfg, (void)comm, (void)comm_ud, (void)out;
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "ddp: not yet");
}
