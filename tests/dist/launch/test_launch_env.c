/* A rank reading its launch environment: the torchrun variables, Open MPI's as a fallback, and the
 * errors a hand-started rank gets for missing or malformed values. */
#include "dist/launch/launch.h"
#include "tests/rs_test.h"

#include <string.h>

static const char *const all_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
};

/* Clears every launch variable, then sets "NAME=VALUE" pairs from a NULL-terminated list. */
static void set_env(const char *const *kv)
{
    for (size_t i = 0; i < sizeof all_vars / sizeof *all_vars; i++) unsetenv(all_vars[i]);
    for (; kv && *kv; kv += 2) setenv(kv[0], kv[1], 1);
}

/* Parsing must fail with RS_ERR_ARG and a message containing `want`. */
static void expect_error(const char *const *kv, const char *want)
{
    set_env(kv);
    rs_launch_env e;
    rs_err err = {0};
    rs_status st = rs_launch_env_from_environ(&e, &err);
    RS_CHECK(st == RS_ERR_ARG && strstr(err.msg, want) != NULL, "want error containing '%s', got %s: '%s'", want,
             rs_status_name(st), err.msg);
    printf("error ok: %s\n", err.msg);
}

int main(void)
{
    rs_launch_env e;
    rs_err err = {0};

    set_env((const char *[]){"RANK", "1", "WORLD_SIZE", "4", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500",
                             NULL});
    RS_CHECK(rs_launch_env_from_environ(&e, &err) == RS_OK, "torchrun: %s", err.msg);
    RS_CHECK(e.rank == 1 && e.world_size == 4 && e.local_rank == 1 && e.local_world_size == 4, "torchrun ranks");
    RS_CHECK(strcmp(e.master_addr, "10.0.0.1") == 0 && e.master_port == 29500, "master %s:%d", e.master_addr,
             e.master_port);
    RS_CHECK(strcmp(e.source, "torchrun") == 0, "source %s", e.source);

    set_env((const char *[]){"RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2",
                             "MASTER_ADDR", "node0", "MASTER_PORT", "1", NULL});
    RS_CHECK(rs_launch_env_from_environ(&e, &err) == RS_OK, "two hosts: %s", err.msg);
    RS_CHECK(e.rank == 3 && e.local_rank == 1 && e.local_world_size == 2 && e.master_port == 1, "two hosts");
    RS_CHECK(e.group_rank == 1, "rank 3 in nodes of 2 is on node 1 (GROUP_RANK unset), got %d", e.group_rank);
    set_env((const char *[]){"RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2",
                             "GROUP_RANK", "0", "MASTER_ADDR", "node0", "MASTER_PORT", "1", NULL});
    RS_CHECK(rs_launch_env_from_environ(&e, &err) == RS_OK && e.group_rank == 0, "GROUP_RANK as given: %s", err.msg);
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "2", "GROUP_RANK", "2", "MASTER_ADDR", "h", "MASTER_PORT",
                                  "1", NULL},
                 "GROUP_RANK=2 is out of range (use 0..1)");

    /* Open MPI: mpirun -np 3 sets these; MASTER_* are optional there. */
    set_env((const char *[]){"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "3",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "2", "OMPI_COMM_WORLD_LOCAL_SIZE", "3", NULL});
    RS_CHECK(rs_launch_env_from_environ(&e, &err) == RS_OK, "mpirun: %s", err.msg);
    RS_CHECK(e.rank == 2 && e.world_size == 3 && e.local_rank == 2 && strcmp(e.source, "mpirun") == 0 &&
                 e.master_port == 0 && e.master_addr[0] == '\0',
             "mpirun values");
    set_env((const char *[]){"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "MASTER_ADDR",
                             "127.0.0.1", "MASTER_PORT", "29501", NULL});
    RS_CHECK(rs_launch_env_from_environ(&e, &err) == RS_OK, "mpirun + master: %s", err.msg);
    RS_CHECK(e.master_port == 29501 && strcmp(e.master_addr, "127.0.0.1") == 0 && e.local_rank == 0,
             "mpirun + master values");
    /* RANK wins over OMPI_* when both are there. */
    set_env((const char *[]){"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "RANK", "1",
                             "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "29502", NULL});
    RS_CHECK(rs_launch_env_from_environ(&e, &err) == RS_OK && e.rank == 1 && strcmp(e.source, "torchrun") == 0,
             "RANK first: %s", err.msg);

    expect_error(NULL, "RANK is not set");
    expect_error((const char *[]){"RANK", "0", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
                 "WORLD_SIZE is not set");
    expect_error((const char *[]){"RANK", "abc", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
                 "RANK='abc' is not a whole number (use 0..1)");
    expect_error((const char *[]){"RANK", "-1", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
                 "RANK='-1' is not a whole number");
    expect_error((const char *[]){"RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
                 "with WORLD_SIZE=2: RANK=2 is out of range (use 0..1)");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "0", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
                 "WORLD_SIZE=0 is out of range");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "1", NULL},
                 "MASTER_ADDR is not set");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", NULL},
                 "MASTER_PORT is not set");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "70000", NULL},
                 "MASTER_PORT=70000 is out of range (use 1..65535)");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "29500x",
                                  NULL},
                 "MASTER_PORT='29500x' is not a whole number");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "", "MASTER_PORT", "1", NULL},
                 "MASTER_ADDR='' is not a host name");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "4", "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "h",
                                  "MASTER_PORT", "1", NULL},
                 "LOCAL_RANK is not set");
    expect_error((const char *[]){"RANK", "0", "WORLD_SIZE", "4", "LOCAL_RANK", "2", "LOCAL_WORLD_SIZE", "2",
                                  "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL},
                 "LOCAL_RANK=2 is out of range (use 0..1)");
    expect_error((const char *[]){"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "x", NULL},
                 "OMPI_COMM_WORLD_SIZE='x' is not a whole number");
    expect_error((const char *[]){"OMPI_COMM_WORLD_RANK", "0", NULL}, "OMPI_COMM_WORLD_SIZE is not set");
    set_env(NULL);
    RS_CHECK(rs_launch_env_from_environ(NULL, &err) == RS_ERR_ARG, "NULL out");
    return rs_test_finish("launch-env");
}
