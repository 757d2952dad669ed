/* A rank's side of the launch: reading the torchrun variables (or Open MPI's, for ranks started by
 * mpirun) from the environment, with errors that say which variable, what it held, and what works,
 * since a hand-started rank with a typo is the usual way this goes wrong. */
#include "dist/launch/launch.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Parses a whole non-negative decimal int; 0 on success. */
static int parse_int(const char *s, int *out)
{
    if (!s || !*s) return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

/* Reads `name` as an int in [lo, hi]; a missing variable is an error only when `required`. */
static rs_status get_int(const char *name, int required, int lo, int hi, int *out, int *present,
                         const char *hint, rs_err *err)
{
    const char *v = getenv(name);
    *present = v != NULL;
    if (!v) {
        if (!required) return RS_OK;
        return rs_err_set(err, RS_ERR_ARG, "%s is not set (%s)", name, hint);
    }
    int x;
    if (parse_int(v, &x) < 0)
        return rs_err_set(err, RS_ERR_ARG, "%s='%s' is not a whole number (use %d..%d)", name, v, lo, hi);
    if (x < lo || x > hi)
        return rs_err_set(err, RS_ERR_ARG, "%s=%d is out of range (use %d..%d)", name, x, lo, hi);
    *out = x;
    return RS_OK;
}

rs_status rs_launch_env_from_environ(rs_launch_env *out, rs_err *err)
{
    if (!out) return rs_err_set(err, RS_ERR_ARG, "rs_launch_env_from_environ: out is NULL");
    memset(out, 0, sizeof *out);
    int torchrun = getenv("RANK") != NULL || getenv("WORLD_SIZE") != NULL;
    int mpi = !torchrun && (getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE"));
    if (!torchrun && !mpi)
        return rs_err_set(err, RS_ERR_ARG,
                          "RANK is not set: start ranks with the launcher, by hand with RANK, WORLD_SIZE, "
                          "MASTER_ADDR and MASTER_PORT (e.g. RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
                          "MASTER_PORT=29500), or with mpirun");
    const char *v_rank = torchrun ? "RANK" : "OMPI_COMM_WORLD_RANK";
    const char *v_size = torchrun ? "WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE";
    const char *v_lrank = torchrun ? "LOCAL_RANK" : "OMPI_COMM_WORLD_LOCAL_RANK";
    const char *v_lsize = torchrun ? "LOCAL_WORLD_SIZE" : "OMPI_COMM_WORLD_LOCAL_SIZE";
    const char *hint = torchrun ? "set it beside RANK, e.g. RANK=0 WORLD_SIZE=2"
                                : "mpirun sets it; this process looks half-started by mpirun";
    int present;
    rs_status st;
    if ((st = get_int(v_size, 1, 1, RS_LAUNCH_MAX_RANKS, &out->world_size, &present, hint, err))) return st;
    if ((st = get_int(v_rank, 1, 0, out->world_size - 1, &out->rank, &present, hint, err)))
        return rs_err_prefix(err, "with %s=%d", v_size, out->world_size);
    out->local_world_size = out->world_size;
    if ((st = get_int(v_lsize, 0, 1, out->world_size, &out->local_world_size, &present, hint, err)))
        return rs_err_prefix(err, "with %s=%d", v_size, out->world_size);
    if ((st = get_int(v_lrank, 0, 0, out->local_world_size - 1, &out->local_rank, &present, hint, err)))
        return rs_err_prefix(err, "with a local world size of %d", out->local_world_size);
    if (!present) {
        /* One host when nothing says otherwise: the local rank is the rank. */
        if (out->local_world_size != out->world_size)
            return rs_err_set(err, RS_ERR_ARG, "%s is not set while %s=%d differs from %s=%d (set %s)",
                              v_lrank, v_lsize, out->local_world_size, v_size, out->world_size, v_lrank);
        out->local_rank = out->rank;
    }
    out->group_rank = out->rank / out->local_world_size;
    if (torchrun && (st = get_int("GROUP_RANK", 0, 0, out->world_size - 1, &out->group_rank, &present, hint, err)))
        return st;
    out->source = torchrun ? "torchrun" : "mpirun";

    /* The rendezvous address: required for torchrun-style ranks, optional under mpirun, whose own
     * wire-up is enough for backend=mpi. */
    const char *addr = getenv("MASTER_ADDR");
    if (addr) {
        if (!addr[0] || strlen(addr) >= RS_LAUNCH_ADDR_MAX || strpbrk(addr, " \t\n"))
            return rs_err_set(err, RS_ERR_ARG,
                              "MASTER_ADDR='%.64s' is not a host name or address (e.g. 127.0.0.1)", addr);
        strcpy(out->master_addr, addr);
    } else if (torchrun) {
        return rs_err_set(err, RS_ERR_ARG, "MASTER_ADDR is not set (rank 0's host, e.g. MASTER_ADDR=127.0.0.1)");
    }
    if ((st = get_int("MASTER_PORT", torchrun, 1, 65535, &out->master_port, &present,
                      "a free TCP port on MASTER_ADDR, e.g. MASTER_PORT=29500", err)))
        return st;
    return RS_OK;
}
