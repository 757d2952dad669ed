/* `ringside launch` as DeepSpeed's `deepspeed` launcher takes its resources (see hostfile.h). */
#define _GNU_SOURCE
#include "dist/launch/hostfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* argv[*i] is --NAME or --NAME=V: its value (the next argument, or after '='), or NULL when it is another
 * option. *i moves past what was used. */
static const char *opt(int argc, char **argv, int *i, const char *name, int *missing)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n)) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n]) return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static rs_status count_arg(const char *name, const char *v, int *out, rs_err *err)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > 1000000)
        return rs_err_set(err, RS_ERR_ARG, "launch: %s %s: give a count (a whole number)", name, v);
    *out = (int)n;
    return RS_OK;
}

rs_status rs_launch_cli_parse(int argc, char **argv, rs_launch_cli *out, rs_err *err)
{
    *out = (rs_launch_cli){.sel = {.num_nodes = -1, .num_procs = -1}};
    for (int i = 0; i < argc; i++) {
        const char *v;
        int missing = 0;
        rs_status st = RS_OK;
        if ((v = opt(argc, argv, &i, "--hostfile", &missing)) || (v = opt(argc, argv, &i, "-H", &missing)))
            out->hostfile = v;
        else if ((v = opt(argc, argv, &i, "--num_nodes", &missing)))
            st = count_arg("--num_nodes", v, &out->sel.num_nodes, err);
        else if ((v = opt(argc, argv, &i, "--num_procs", &missing)) || (v = opt(argc, argv, &i, "--num_gpus", &missing)))
            st = count_arg("--num_procs", v, &out->sel.num_procs, err);
        else if ((v = opt(argc, argv, &i, "--include", &missing)) || (v = opt(argc, argv, &i, "-i", &missing)))
            out->sel.include = v;
        else if ((v = opt(argc, argv, &i, "--exclude", &missing)) || (v = opt(argc, argv, &i, "-e", &missing)))
            out->sel.exclude = v;
        else if (missing)
            return rs_err_set(err, RS_ERR_ARG, "launch: %s needs a value", argv[i]);
        else if (argv[i][0] == '-')
            return rs_err_set(err, RS_ERR_ARG, "launch: unknown option '%s' (--hostfile FILE, --num_nodes N, "
                              "--num_procs N, --include HOST[:SLOTS][@HOST...], --exclude ...)", argv[i]);
        else if (out->script)
            return rs_err_set(err, RS_ERR_ARG, "launch: one script at a time ('%s' and '%s')", out->script, argv[i]);
        else
            out->script = argv[i];
        if (st) return st;
        if (missing) return rs_err_set(err, RS_ERR_ARG, "launch: %s needs a value", argv[i]);
    }
    if (!out->script)
        return rs_err_set(err, RS_ERR_ARG, "launch: which script? ringside launch [--hostfile FILE] [--num_nodes N] "
                          "[--num_procs N] [--include S | --exclude S] SCRIPT.ring");
    return RS_OK;
}

rs_status rs_launch_cli_hosts(const rs_launch_cli *cli, rs_hostfile *out, rs_err *err)
{
    rs_status st;
    if (cli->hostfile) {
        st = rs_hostfile_read(cli->hostfile, out, err);
    } else { /* DeepSpeed without a hostfile: this host, with its devices (here its CPUs) as slots */
        if (cli->sel.num_nodes > 1)
            return rs_err_set(err, RS_ERR_ARG, "Num nodes is >1 but no extra nodes available via hostfile");
        char text[64];
        snprintf(text, sizeof text, "localhost slots=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
        st = rs_hostfile_parse(text, out, err);
    }
    if (!st) st = rs_hostfile_select_apply(out, &cli->sel, err);
    if (st) rs_hostfile_clear(out);
    return st;
}
