/* The backends this build has. shm and tcp are always built; mpi and nccl when meson found them
 * (RS_HAVE_MPI, RS_HAVE_NCCL), so `backends` and rs_pg_new only ever offer what can run. */
#include "pg.h"

#include <stdio.h>
#include <string.h>

extern const rs_pg_ops rs_pg_shm_ops, rs_pg_tcp_ops;
#ifdef RS_HAVE_MPI
extern const rs_pg_ops rs_pg_mpi_ops;
#endif
#ifdef RS_HAVE_NCCL
extern const rs_pg_ops rs_pg_nccl_ops;
#endif

/* Every backend ringside has; backends[] holds those this build has, by the same names (one named here
 * and missing there was not built). */
const char *const rs_pg_backend_names[] = {"shm", "tcp", "mpi", "nccl", NULL};

static const rs_pg_backend backends[] = {
    {"shm", &rs_pg_shm_ops, "one host, POSIX shared memory; the default for local ranks", false, rs_pg_shm_new},
    {"tcp", &rs_pg_tcp_ops, "sockets between every pair of ranks; works across hosts given MASTER_ADDR", false,
     rs_pg_tcp_new},
#ifdef RS_HAVE_MPI
    {"mpi", &rs_pg_mpi_ops, "Open MPI's own collectives; ranks are started by mpirun", true, rs_pg_mpi_new},
#endif
#ifdef RS_HAVE_NCCL
    {"nccl", &rs_pg_nccl_ops, "NVIDIA NCCL on GPUs; the unique id travels through the store", false, rs_pg_nccl_new},
#endif
    {NULL, NULL, NULL, false, NULL},
};

const rs_pg_backend *rs_pg_backends(void) { return backends; }

const rs_pg_backend *rs_pg_backend_find(const char *name)
{
    for (const rs_pg_backend *b = backends; name && b->name; b++)
        if (!strcmp(b->name, name)) return b;
    return NULL;
}

rs_status rs_pg_new(const char *backend, rs_store *store, const char *name, int rank, int world, double timeout_s,
                    rs_pg **out, rs_err *err)
{
    *out = NULL;
    const rs_pg_backend *b = rs_pg_backend_find(backend);
    if (!b) {
        char have[128] = "";
        for (const rs_pg_backend *p = backends; p->name; p++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", p == backends ? "" : ", ", p->name);
        bool known = false;
        for (int i = 0; backend && rs_pg_backend_names[i]; i++) known |= !strcmp(backend, rs_pg_backend_names[i]);
        return rs_err_set(err, RS_ERR_UNSUPPORTED, "backend '%s' %s; this build has: %s", backend ? backend : "(none)",
                          known ? "was not built (meson did not find its library)" : "does not exist", have);
    }
    return b->create(store, name, rank, world, timeout_s, out, err);
}
