/* placeholder until the tcp transport lands */
#include "dist/pg/step.h"
const rs_pg_ops rs_pg_tcp_ops = {.name = "tcp"};
rs_status rs_pg_tcp_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err)
{
    (void)store, (void)name, (void)rank, (void)world, (void)timeout_s;
    *out = NULL;
    return rs_err_set(err, RS_ERR_UNSUPPORTED, "tcp backend: not yet");
}
