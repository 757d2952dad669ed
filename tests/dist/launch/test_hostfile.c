/* DeepSpeed's hostfile as ringside reads it: DeepSpeed's examples and refusals (its messages, from
 * deepspeed/launcher/runner.py), and the --host list mpirun is given for a number of ranks. */
#include "dist/launch/hostfile.h"
#include "dist/launch/remote.h"
#include "tests/rs_test.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

static void test_parse(void)
{
    rs_hostfile h;
    rs_err e = {0};
    const char *text = "# DeepSpeed's example\n"
                       "worker-1 slots=4\n"
                       "   worker-2    slots=4  \n"
                       "\n"
                       "10.77.0.3 slots=2 type=A100\n";
    RS_CHECK(rs_hostfile_parse(text, &h, &e) == RS_OK, "parse: %s", e.msg);
    RS_CHECK(h.n == 3 && h.slots == 10, "3 hosts, 10 slots: %d, %lld", h.n, h.slots);
    RS_CHECK(h.n == 3 && !strcmp(h.hosts[0].name, "worker-1") && h.hosts[0].slots == 4 &&
                 !strcmp(h.hosts[1].name, "worker-2") && !strcmp(h.hosts[2].name, "10.77.0.3") && h.hosts[2].slots == 2,
             "hosts in the file's order with their slots");
    char buf[256];
    RS_CHECK(rs_hostfile_mpi_hosts(&h, 6, buf, sizeof buf, &e) == RS_OK && !strcmp(buf, "worker-1:4,worker-2:2"),
             "6 ranks fill worker-1 then worker-2: '%s'", buf);
    RS_CHECK(rs_hostfile_mpi_hosts(&h, 10, buf, sizeof buf, &e) == RS_OK &&
                 !strcmp(buf, "worker-1:4,worker-2:4,10.77.0.3:2"), "10 ranks take every slot: '%s'", buf);
    RS_CHECK(rs_hostfile_mpi_hosts(&h, 11, buf, sizeof buf, &e) == RS_ERR_ARG &&
                 strstr(e.msg, "11 ranks do not fit in the hostfile's 10 slots"), "11 ranks: %s", e.msg);
    rs_hostfile_clear(&h);
}

static void test_refusals(void)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"worker-1 slots=4\nworker-1 slots=2\n", "Hostfile contains multiple entries for worker-1, unable to proceed with launching"},
        {"worker-1 slots=4\nworker-2\n", "Hostfile contains a bad entry: worker-2, unable to proceed with launching"},
        {"worker-1 gpus=4\n", "Hostfile contains a bad entry: worker-1 gpus=4"},
        {"worker-1 slots=four\n", "Hostfile contains a bad entry: worker-1 slots=four"},
        {"# only a comment\n\n", "Hostfile is empty or not formatted correctly, unable to proceed with launching."},
        {"", "Hostfile is empty or not formatted correctly"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rs_hostfile h;
        rs_err e = {0};
        RS_CHECK(rs_hostfile_parse(cases[i].text, &h, &e) == RS_ERR_ARG && strstr(e.msg, cases[i].msg) && h.n == 0,
                 "case %zu refused with '%s': got '%s'", i, cases[i].msg, e.msg);
    }
    rs_hostfile h;
    rs_err e = {0};
    RS_CHECK(rs_hostfile_read("/nonexistent/hostfile", &h, &e) == RS_ERR_IO && strstr(e.msg, "/nonexistent/hostfile"),
             "a missing file is named: %s", e.msg);
}

/* h narrowed by sel, as "host:count,..." (the slots DeepSpeed's filter keeps, counted), or "error: MSG". */
static void selected(const char *text, rs_hostfile_select sel, char *buf, size_t cap)
{
    rs_hostfile h;
    rs_err e = {0};
    if (rs_hostfile_parse(text, &h, &e) || rs_hostfile_select_apply(&h, &sel, &e) ||
        rs_hostfile_mpi_hosts(&h, (int)h.slots, buf, cap, &e))
        snprintf(buf, cap, "error: %s", e.msg);
    rs_hostfile_clear(&h);
}

/* DeepSpeed's own cases (tests/unit/launcher/test_run.py: test_parser_local, _multinode, _errors,
 * test_num_plus_parser), their slot lists written as counts, and runner.py's --num_nodes / --num_gpus. */
static void test_select(void)
{
    const char *one = "worker-0 slots=4\n", *two = "worker-0 slots=4\nworker-1 slots=4\n";
    static const struct {
        int two;
        const char *inc, *exc;
        int nodes, procs;
        const char *want;
    } cases[] = {
        {0, NULL, NULL, -1, -1, "worker-0:4"},
        {0, NULL, "worker-0:1", -1, -1, "worker-0:3"},
        {0, NULL, "worker-0:1,2", -1, -1, "worker-0:2"},
        {0, "worker-0:1", NULL, -1, -1, "worker-0:1"},
        {0, "worker-0:1,1", NULL, -1, -1, "worker-0:1"},
        {0, "worker-0:1@worker-0:0,1", NULL, -1, -1, "worker-0:2"},
        {0, "worker-0", NULL, -1, -1, "worker-0:4"},
        {0, NULL, "worker-0", -1, -1, "error: no host is left"},
        {0, NULL, "worker-0:0,1,2,3", -1, -1, "error: no host is left"},
        {1, NULL, NULL, -1, -1, "worker-0:4,worker-1:4"},
        {1, "worker-1:0,3", NULL, -1, -1, "worker-1:2"},
        {1, NULL, "worker-1", -1, -1, "worker-0:4"},
        {1, NULL, "worker-0:0,1@worker-1:3", -1, -1, "worker-0:2,worker-1:3"},
        {1, "worker-1@worker-0:2", NULL, -1, -1, "worker-0:1,worker-1:4"}, /* the file's order, not the string's */
        {1, "jeff", NULL, -1, -1, "error: Hostname 'jeff' not found in hostfile"},
        {1, NULL, "jeff", -1, -1, "error: Hostname 'jeff' not found in hostfile"},
        {1, "worker-1:4", NULL, -1, -1, "error: No slot '4' specified on host 'worker-1'"},
        {1, NULL, "worker-1:4", -1, -1, "error: No slot '4' specified on host 'worker-1'"},
        {1, NULL, "worker-1@worker-0:1@5", -1, -1, "error: Hostname '5' not found in hostfile"},
        {1, NULL, "worker-1:0,0", -1, -1, "error: list.remove(x): x not in list"},
        {1, "worker-1:x", NULL, -1, -1, "error: invalid literal for int() with base 10: 'x'"},
        {1, "worker-0", "worker-1", -1, -1, "error: include_str and exclude_str are mutually exclusive."},
        {1, "worker-0", NULL, 1, -1, "error: Cannot specify num_nodes/gpus with include/exclude"},
        {1, NULL, "worker-0", -1, 1, "error: Cannot specify num_nodes/gpus with include/exclude"},
        {1, NULL, NULL, 1, -1, "worker-0:4"},
        {1, NULL, NULL, -1, 2, "worker-0:2,worker-1:2"},
        {1, NULL, NULL, 1, 3, "worker-0:3"},
        {1, NULL, NULL, 5, 9, "worker-0:4,worker-1:4"}, /* more than there are: what there is */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[RS_ERR_MSG_MAX + 16];
        selected(cases[i].two ? two : one,
                 (rs_hostfile_select){cases[i].inc, cases[i].exc, cases[i].nodes, cases[i].procs}, got, sizeof got);
        bool ok = !strncmp(cases[i].want, "error: ", 7) ? !strncmp(got, cases[i].want, strlen(cases[i].want))
                                                          : !strcmp(got, cases[i].want);
        RS_CHECK(ok, "select case %zu (include '%s', exclude '%s', nodes %d, procs %d): want '%s', got '%s'", i,
                 cases[i].inc ? cases[i].inc : "", cases[i].exc ? cases[i].exc : "", cases[i].nodes, cases[i].procs,
                 cases[i].want, got);
    }
}

/* `ringside launch`'s arguments, DeepSpeed's spellings. */
static void test_cli(void)
{
    char *ok[] = {"--hostfile", "hf", "--num_nodes=2", "--num_gpus", "3", "-i", "a:0@b", "run.ring"};
    rs_launch_cli lc;
    rs_err e = {0};
    RS_CHECK(rs_launch_cli_parse(8, ok, &lc, &e) == RS_OK && !strcmp(lc.hostfile, "hf") && lc.sel.num_nodes == 2 &&
                 lc.sel.num_procs == 3 && !strcmp(lc.sel.include, "a:0@b") && !lc.sel.exclude &&
                 !strcmp(lc.script, "run.ring"), "launch's options read: %s", e.msg);
    static const struct { int argc; char *argv[3]; const char *msg; } bad[] = {
        {1, {"--num_nodes"}, "--num_nodes needs a value"},
        {2, {"--num_procs", "two"}, "--num_procs two: give a count"},
        {1, {"--gpus=2"}, "unknown option '--gpus=2'"},
        {2, {"a.ring", "b.ring"}, "one script at a time"},
        {0, {NULL}, "which script?"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        RS_CHECK(rs_launch_cli_parse(bad[i].argc, (char **)bad[i].argv, &lc, &e) == RS_ERR_ARG &&
                     strstr(e.msg, bad[i].msg), "launch argument case %zu: want '%s', got '%s'", i, bad[i].msg, e.msg);
    rs_hostfile h;
    lc = (rs_launch_cli){.sel = {.num_nodes = 2, .num_procs = -1}, .script = "x"};
    RS_CHECK(rs_launch_cli_hosts(&lc, &h, &e) == RS_ERR_ARG && strstr(e.msg, "Num nodes is >1 but no extra nodes"),
             "no hostfile and 2 nodes: DeepSpeed's refusal: %s", e.msg);
    lc.sel.num_nodes = -1;
    lc.sel.num_procs = 1;
    RS_CHECK(rs_launch_cli_hosts(&lc, &h, &e) == RS_OK && h.n == 1 && !strcmp(h.hosts[0].name, "localhost") &&
                 h.slots == 1 && rs_hostfile_is_local(&h), "no hostfile: this host, capped to 1 slot");
    rs_hostfile_clear(&h);
}

/* A rank's command through the rsh agent: the agent's words from RINGSIDE_RSH_AGENT, and the remote words
 * quoted so that a shell joining them (as ssh does) gets each back whole. The "agent" here is sh itself:
 * `sh -c 'eval "$0 $*"' env WORDS...` re-parses the joined words as sshd's shell would. */
static void test_remote(void)
{
    setenv("RINGSIDE_RSH_AGENT", "sh -c : rsh", 1);
    char agent[256];
    int words = rs_remote_agent(agent, sizeof agent);
    RS_CHECK(words == 2 && !strcmp(agent, "sh") && !strcmp(agent + 3, "-c"), "agent 'sh -c : rsh' is sh -c: %d", words);
    const char *vars[] = {"RANK=3", "NOTE=it's a b", NULL};
    const char *argv[] = {"sh", "-c", "printf '%s|' \"$RANK\" \"$NOTE\" \"$0\" \"$1\"", "x y", "$HOME;", NULL};
    char **av = rs_remote_argv(agent, words, "eval \"$0 $*\"", vars, argv);
    RS_CHECK(av != NULL, "remote argv");
    if (!av) return;
    char path[] = "/tmp/rs-remote-XXXXXX";
    int fd = mkstemp(path);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        execvp(av[0], av);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char got[256] = "";
    ssize_t n = pread(fd, got, sizeof got - 1, 0);
    got[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    free(av);
    RS_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strcmp(got, "3|it's a b|x y|$HOME;|"),
             "the words arrive whole through a joining shell: '%s'", got);
    char **h = NULL;
    rs_err e = {0};
    RS_CHECK(rs_remote_rank_hosts("a:2,b:1", 3, &h, &e) == RS_OK && !strcmp(h[0], "a") && !strcmp(h[1], "a") &&
                 !strcmp(h[2], "b"), "a:2,b:1 places ranks 0, 1 on a and 2 on b");
    free(h);
    RS_CHECK(rs_remote_rank_hosts("a:1", 3, &h, &e) == RS_ERR_ARG && strstr(e.msg, "places 1 of 3 ranks"), "%s", e.msg);
}

int main(void)
{
    test_remote();
    test_parse();
    test_refusals();
    test_select();
    test_cli();
    return rs_test_finish("hostfile");
}
