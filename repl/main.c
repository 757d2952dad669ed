/* ringside: the workbench's entry point.
 *   ringside                      the prompt (or, with stdin not a terminal, commands read from it)
 *   ringside FILE.ring            run a script
 *   ringside -c "cmd; cmd"        run a one-liner
 *   ringside launch [--hostfile F] [--num_nodes N] [--num_procs N] [--include S | --exclude S] FILE.ring
 *                                 a script whose rank-starting commands run on those hosts (DeepSpeed's launcher)
 *   ringside --worker JOB k=v...  one rank of a distributed job (dist/worker/worker.h)
 *   ringside serve --repo DIR ...  the inference server alone (serve/serve_main.c)
 * Options: --db PATH (session log file), --no-db, --keep-going (scripts go on after an error).
 * Exit status: 0, or 1 when a command failed (scripts stop at the first unless --keep-going).
 * exit() lives here and nowhere else. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/launch/hostfile.h"
#include "dist/worker/worker.h"
#include "engine/cpu/blas.h"
#include "repl.h"
#include "serve/ranks.h"
#include "serve/server.h"
#include "slog/slog.h"
#include "wrap.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fputs("usage: ringside [--db PATH | --no-db] [--keep-going] [FILE.ring | -c \"COMMANDS\"]\n"
          "       ringside [--db PATH | --no-db] launch [--hostfile FILE] [--num_nodes N] [--num_procs N]\n"
          "                [--include HOST[:SLOTS][@HOST...] | --exclude ...] FILE.ring\n"
          "  with no file and a terminal: the interactive prompt (`help`, `play tour`)\n"
          "  with no file and stdin not a terminal: commands are read from stdin\n",
          f);
}

static void banner(rs_session *s)
{
    rs_blas_info b;
    rs_blas_get_info(&b);
    fprintf(s->out, "%sringside %s%s: distributed deep learning, hands on. OpenBLAS %s, %d threads.\n",
            rs_sty(s, "\033[1m"), RS_VERSION, rs_sty(s, "\033[0m"), b.core,
            s->threads);
    fprintf(s->out, "Type `help` for the commands, `play tour` for a three-minute tour, or try:\n"
                    "  model m = mlp 784-256-10\n  train m on digits\n  predict m on digits\n");
}

static char *history_path(void)
{
    char dir[1024];
    const char *x = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(dir, sizeof dir, "%s/ringside", x);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.local/share/ringside", home);
    else return NULL;
    char parent[1024];
    snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(dir, '/') - dir), dir);
    mkdir(parent, 0755);
    mkdir(dir, 0755);
    size_t n = strlen(dir) + 16;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/history", dir);
    return p;
}

int main(int argc, char **argv)
{
    rs_blas_prefer_fast_kernel(argv);
    /* A rank process (started by the REPL, mpirun or by hand with the torchrun variables). */
    /* the rank job of a model served across ranks lives in serve/ (it loads models as the server does) */
    if (argc >= 3 && !strcmp(argv[1], "--worker") && !strcmp(argv[2], "serve"))
        return rs_serve_rank_main(argc - 2, argv + 2, stdout, stderr);
    if (argc >= 2 && !strcmp(argv[1], "--worker")) return rs_worker_main(argc - 2, argv + 2, stdout, stderr);
    if (argc >= 2 && !strcmp(argv[1], "serve")) return rs_serve_main(argc - 2, argv + 2, stdout, stderr);
    const char *db = NULL, *cmdline = NULL, *file = NULL;
    bool no_db = false, keep_going = false;
    rs_hostfile *launch = NULL; /* `launch`'s hosts: the session's once it exists */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "launch") && !file && !cmdline) {
            rs_launch_cli lc;
            rs_err e = {0};
            launch = calloc(1, sizeof *launch);
            if (!launch || rs_launch_cli_parse(argc - i - 1, argv + i + 1, &lc, &e) || rs_launch_cli_hosts(&lc, launch, &e)) {
                fprintf(stderr, "ringside: %s\n", launch ? e.msg : "out of memory");
                free(launch);
                return 2;
            }
            file = lc.script;
            break;
        }
        if (!strcmp(argv[i], "--db") && i + 1 < argc) db = argv[++i];
        else if (!strncmp(argv[i], "--db=", 5)) db = argv[i] + 5;
        else if (!strcmp(argv[i], "--no-db")) no_db = true;
        else if (!strcmp(argv[i], "--keep-going")) keep_going = true;
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) cmdline = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            cmdline = "version";
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "ringside: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!file) file = argv[i];
        else {
            fprintf(stderr, "ringside: one script at a time ('%s' and '%s')\n", file, argv[i]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* projector mode: every line the session prints fits the terminal (80 columns in scripts and pipes) */
    FILE *out = rs_wrap_open(stdout), *err = NULL;
    rs_session *s = rs_session_new(out ? out : stdout);
    if (!s) {
        rs_hostfile_clear(launch);
        free(launch);
        if (out) fclose(out);
        return 1;
    }
    bool tty_in = isatty(STDIN_FILENO), tty_out = isatty(STDOUT_FILENO);
    const char *term = getenv("TERM");
    s->interactive = tty_in && tty_out && !file && !cmdline;
    if (!s->interactive) { /* scripts: `ringside s.ring 2>/dev/null` hides only the errors */
        err = rs_wrap_open(stderr);
        s->err = err ? err : stderr;
    }
    s->color = tty_out && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
    s->keep_going = keep_going;
    s->interrupt = &interrupted;
    s->launch = launch;

    if (!no_db) {
        /* The argv as one line, for the sessions table. */
        size_t n = 1;
        for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
        char *args = calloc(n, 1);
        for (int i = 0; args && i < argc; i++) {
            if (i) strcat(args, " ");
            strcat(args, argv[i]);
        }
        rs_err err = {0};
        if (rs_slog_open(db, args, &s->log, &err)) {
            fprintf(stderr, "ringside: session log: %s\n", err.msg);
            if (db) { /* an explicit --db that cannot be used is an error; the default is best effort */
                free(args);
                rs_session_free(s);
                return 1;
            }
            fprintf(stderr, "ringside: going on without a session log (--db PATH to choose another file)\n");
        }
        free(args);
        if (s->log) rs_slog_set_interrupt(s->log, &interrupted); /* Ctrl-C stops a long `sql` query */
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    int errors = 0;
    if (cmdline) {
        s->source = "-c";
        errors = rs_repl_line(s, cmdline);
    } else if (file) {
        s->echo = true;
        errors = rs_repl_file(s, file);
    } else if (s->interactive) {
        banner(s);
        char *hist = history_path();
        errors = rs_repl_interactive(s, hist);
        free(hist);
        errors = 0; /* a person's typos are not the session's exit status */
    } else {
        s->echo = true;
        s->source = "stdin";
        errors = rs_repl_file(s, "/dev/stdin");
    }
    if (s->log) rs_slog_close(s->log);
    s->log = NULL;
    rs_session_free(s);
    if (err) fclose(err);
    if (out) fclose(out);
    return errors ? 1 : 0;
}
