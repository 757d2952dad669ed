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

#endif
