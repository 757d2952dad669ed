/* DeepSpeed's hostfile as ringside reads it: DeepSpeed's examples and refusals (its messages, from
 * deepspeed/launcher/runner.py), and the --host list mpirun is given for a number of ranks. */
#include "dist/launch/hostfile.h"
#include "tests/rs_test.h"

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

int main(void)
{
    test_parse();
    test_refusals();
    return rs_test_finish("hostfile");
}
