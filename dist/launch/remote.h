/* Ranks on other hosts without mpirun: each started here as `AGENT HOST env K=V... PROGRAM ARGS...`,
 * the agent being ssh or any program that runs a command on a host the same way (Open MPI's rsh agent
 * idea: RINGSIDE_RSH_AGENT, else OMPI_MCA_plm_rsh_agent, else ssh). ssh carries no environment, so the
 * torchrun variables ride on the remote command line; the agent's process is the rank as the launcher
 * sees it (its output, its exit status, its signals), as pdsh's are to DeepSpeed's launcher. */
#ifndef RS_LAUNCH_REMOTE_H
#define RS_LAUNCH_REMOTE_H

#include "engine/core/status.h"

/* The agent's command (words split on blanks, "ssh : rsh" lists cut at the first ' : '), NUL-separated
 * into buf; its word count, 0 when buf is too small or the agent is empty. */
int rs_remote_agent(char *buf, size_t cap);

/* The local argv of a rank on `host`: the agent's nwords words (NUL-separated in agent), host, then
 * `env` and each of vars (NULL-terminated "K=V") and argv (NULL-terminated) quoted for the remote
 * shell. One block (the caller's, free()); NULL when out of memory. */
char **rs_remote_argv(const char *agent, int nwords, const char *host, const char *const *vars, const char *const *argv);

/* "a:2,b:1" (rs_hostfile_mpi_hosts's list) as the host of each of world ranks, filled in order: one
 * block (the caller's, free()); RS_ERR_ARG when the counts do not add up to world. */
rs_status rs_remote_rank_hosts(const char *list, int world, char ***out, rs_err *err);

#endif
