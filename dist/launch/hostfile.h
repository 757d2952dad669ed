/* DeepSpeed's hostfile (`worker-1 slots=4`, one host a line, `#` comments), read with DeepSpeed's own
 * rules and messages (deepspeed/launcher/runner.py), and handed to Open MPI's mpirun, which starts the
 * ranks on those hosts through its rsh agent (ssh, or OMPI_MCA_plm_rsh_agent): ringside schedules
 * nothing itself. */
#ifndef RS_HOSTFILE_H
#define RS_HOSTFILE_H

#include <stddef.h>

#include "dist/launch/launch.h"
#include "engine/core/status.h"

typedef struct rs_hostfile_host {
    char name[RS_LAUNCH_ADDR_MAX];
    int slots;
} rs_hostfile_host;

typedef struct rs_hostfile {
    rs_hostfile_host *hosts; /* (n) owned, in the file's order */
    int n;
    long long slots;         /* the sum of the hosts' slots */
} rs_hostfile;

/* Parses text (the whole file). RS_ERR_ARG with DeepSpeed's message for a bad entry, a host given twice,
 * or a file with no host; *out is then empty. */
rs_status rs_hostfile_parse(const char *text, rs_hostfile *out, rs_err *err);
/* Reads and parses path; RS_ERR_IO naming the file when it cannot be read. */
rs_status rs_hostfile_read(const char *path, rs_hostfile *out, rs_err *err);
/* mpirun's --host list for the first `ranks` slots: "a:2,b:2" (hosts filled in order, as DeepSpeed's
 * launcher and mpirun's default mapping fill them). RS_ERR_ARG when the hosts have fewer slots. */
rs_status rs_hostfile_mpi_hosts(const rs_hostfile *h, int ranks, char *buf, size_t cap, rs_err *err);
void rs_hostfile_clear(rs_hostfile *h);

/* DeepSpeed's launcher's choice among the hostfile's resources (deepspeed/launcher/runner.py):
 * --include / --exclude as NODE_SPEC[@NODE_SPEC...], NODE_SPEC = NAME[:SLOT[,SLOT...]] (a host alone
 * means all its slots), exclusive of each other and of --num_nodes / --num_procs; --num_nodes keeps the
 * first N hosts, --num_procs at most N slots on each (DeepSpeed's --num_gpus; ringside's ranks are not
 * bound to slot numbers, so only the count of each host's chosen slots is kept). */
typedef struct rs_hostfile_select {
    const char *include, *exclude; /* NULL or "": not given */
    int num_nodes, num_procs;      /* < 0: not given */
} rs_hostfile_select;

/* Narrows h to the selection, keeping the file's host order and dropping hosts left with no slot.
 * RS_ERR_ARG with DeepSpeed's message (a host not in the file, a slot it does not have, include with
 * exclude...); h is unchanged then, except empty when the selection leaves no host. */
rs_status rs_hostfile_select_apply(rs_hostfile *h, const rs_hostfile_select *sel, rs_err *err);
/* Whether every host is this one ("localhost", "127.0.0.1"): the ranks need no other host. */
int rs_hostfile_is_local(const rs_hostfile *h);

/* `ringside launch [--hostfile FILE] [--num_nodes N] [--num_procs N] [--include S | --exclude S]
 * SCRIPT.ring`, DeepSpeed's launcher's options (-H for --hostfile, --num_gpus for --num_procs, --opt=V
 * forms too): the hosts become the session's default for rank-starting commands (launch_cli.c). */
typedef struct rs_launch_cli {
    const char *hostfile;   /* NULL: this host alone, its CPUs as slots (DeepSpeed: local resources) */
    rs_hostfile_select sel;
    const char *script;     /* argv's */
} rs_launch_cli;

/* Parses argv (what follows `launch`); every argument is read. RS_ERR_ARG naming a bad option. */
rs_status rs_launch_cli_parse(int argc, char **argv, rs_launch_cli *out, rs_err *err);
/* The launch's hosts: the hostfile read and narrowed by the selection. *out is the caller's. */
rs_status rs_launch_cli_hosts(const rs_launch_cli *cli, rs_hostfile *out, rs_err *err);

#endif
