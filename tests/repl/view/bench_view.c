/* What a dashboard frame costs: replays a recorded stream and draws it into a virtual screen over and
 * over, printing draws per second and the share of one core that 20 frames/s would take. A figure,
 * not a test (never timed assertions in tests). Usage: bench-view SRCDIR [W H [SECONDS]] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "replay.h"
#include "repl/view/render.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    int w = argc > 3 ? atoi(argv[2]) : 160, h = argc > 3 ? atoi(argv[3]) : 48;
    double secs = argc > 4 ? atof(argv[4]) : 2;
    /* ringdata4-long: the data pane (step=1's values of a 1001-float ring all_reduce) */
    const char *streams[] = {"ddp4.lines", "ring4.lines", "full8", "ringdata4-long.lines"};
    for (int k = 0; k < 4; k++) {
        rs_view_model *vm = rs_view_model_new(NULL);
        bool coll = k == 1 || k == 3;
        rs_view_run run = {"r1", coll ? "collective" : "train", coll ? "ring" : "ddp", "shm", k == 2 ? 8 : 4, 6, 1, -1};
        rs_view_set_run(vm, &run);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, streams[k]);
        if (k == 2) {
            /* the worst case the model allows: 8 ranks with every ring full, all spans in the window */
            char l[256];
            for (int r = 0; r < 8; r++)
                for (int i = 0; i < RS_VIEW_SPAN_N; i++) {
                    double t = i * 1e-3;
                    snprintf(l, sizeof l, "@phase %d %d %s %.6f %.6f", r, i / 4, i % 2 ? "forward" : "backward", t,
                             t + 1e-3);
                    rs_view_feed_line(vm, r, l);
                    if (i % 4 == 0) {
                        snprintf(l, sizeof l, "@comm %d %d all_reduce 0 1000000 %.6f %.6f", r, i / 4, t, t + 2e-3);
                        rs_view_feed_line(vm, r, l);
                        snprintf(l, sizeof l, "@step %d %d 0 %.4f 0.1 1000", r, i / 4, 2.0 - i * 1e-3);
                        rs_view_feed_line(vm, r, l);
                        rs_view_feed_line(vm, r, "@mem 0 1 1000 1000 2000 500 100 0 0 1000 1000 2000 500 100 0 0");
                        rs_view_feed_line(vm, r, "a log line of a rank, long enough to fill the pane's width ......");
                    }
                }
        } else if (rs_test_replay(vm, path, -1) < 0) {
            fprintf(stderr, "bench-view: cannot read %s\n", path);
            return 1;
        }
        rs_view_screen *s = rs_view_screen_new(w, h, NULL);
        rs_view_opts o = rs_view_opts_detect("xterm-256color", NULL, true);
        long n = 0;
        size_t sink = 0;
        double t0 = cpu_now(), t = t0;
        while (t - t0 < secs) {
            for (int i = 0; i < 50; i++, n++) {
                rs_view_draw(s, vm, vm->t_last, &o);
                sink += rs_view_screen_at(s, 0, 0)->ch;
            }
            t = cpu_now();
        }
        double per = (t - t0) / (double)n;
        printf("%-11s %dx%d: %ld draws in %.2f s CPU: %.1f us/draw, %.0f draws/s; at 20 frames/s %.3f%% of a core"
               " (%zu)\n", streams[k], w, h, n, t - t0, per * 1e6, 1 / per, 100 * 20 * per, sink % 2);
        rs_view_screen_free(s);
        rs_view_model_free(vm);
    }
    return 0;
}
