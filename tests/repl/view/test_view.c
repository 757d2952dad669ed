/* The dashboard's panes, headless: recorded streams of real 4-rank runs (a DDP training with overlap,
 * a ring all_reduce) replayed into the model and drawn at 80x24 and 160x48; the text must match the
 * snapshots beside this file (run with --update to rewrite them after a deliberate change, then read
 * the diff). Also: layouts never overlap, ASCII mode writes no byte >= 0x80, NO_COLOR writes no colour,
 * and junk lines are counted and dropped. Usage: test-view SRCDIR [--update] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "repl/view/render.h"
#include "repl/view/serve_pane.h"
#include "rs_test.h"

static const char *srcdir = ".";
static int update = 0;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* Compares text with the snapshot NAME (or writes it with --update); prints the first differing line. */
static void snapshot(const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", srcdir, name);
    if (update) {
        FILE *f = fopen(path, "wb");
        RS_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
        return;
    }
    char *want = slurp(path);
    RS_CHECK(want != NULL, "no snapshot %s (run with --update to create it)", path);
    if (!want) return;
    if (strcmp(want, text) != 0) {
        int line = 1;
        const char *a = want, *b = text;
        while (*a && *a == *b) {
            if (*a == '\n') line++;
            a++, b++;
        }
        const char *ae = strchr(a, '\n'), *be = strchr(b, '\n');
        while (a > want && a[-1] != '\n') a--;
        while (b > text && b[-1] != '\n') b--;
        RS_CHECK(0, "%s differs at line %d:\n  want: %.*s\n  got:  %.*s\n--- got, whole ---\n%s", name, line,
                 (int)(ae ? ae - a : (long)strlen(a)), a, (int)(be ? be - b : (long)strlen(b)), b, text);
    }
    free(want);
}

static rs_view_model *load(const char *stream, int lines, const rs_view_run *run)
{
    rs_view_model *vm = rs_view_model_new(NULL);
    RS_CHECK(vm != NULL, "model_new");
    if (!vm) exit(1);
    rs_view_set_run(vm, run);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", srcdir, stream);
    int n = rs_test_replay(vm, path, lines);
    RS_CHECK(n > 0, "cannot read %s", path);
    return vm;
}

/* Draws vm at w x h: colour and NO_COLOR give the same text, NO_COLOR no colour at all; the UTF-8
 * text is compared with the snapshot, and the ASCII one checked for bytes >= 0x80. */
static char *draw(const rs_view_model *vm, int w, int h, const char *snap, const char *ascii_snap)
{
    rs_view_screen *s = rs_view_screen_new(w, h, NULL);
    RS_CHECK(s != NULL, "screen_new");
    rs_view_opts color = rs_view_opts_detect("xterm-256color", NULL, true);
    rs_view_opts mono = rs_view_opts_detect("xterm-256color", "1", true);
    rs_view_opts dumb = rs_view_opts_detect("dumb", NULL, true);
    RS_CHECK(color.color && color.utf8 && !mono.color && mono.utf8 && !dumb.color && !dumb.utf8, "opts_detect");
    double now = vm->t_last;

    rs_view_draw(s, vm, now, &color);
    char *t = strdup(rs_view_screen_text(s));
    int colored = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) colored += rs_view_screen_at(s, x, y)->color != 0;
    RS_CHECK(colored > 0, "%s: colour mode drew no colour", snap);

    rs_view_draw(s, vm, now, &mono);
    RS_CHECK(!strcmp(t, rs_view_screen_text(s)), "%s: NO_COLOR changed the text", snap);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            if (rs_view_screen_at(s, x, y)->color != 0) {
                RS_CHECK(0, "%s: NO_COLOR drew colour %d at %d,%d", snap, rs_view_screen_at(s, x, y)->color, x, y);
                y = h;
                break;
            }
    snapshot(snap, t);

    rs_view_draw(s, vm, now, &dumb);
    const char *a = rs_view_screen_text(s);
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        if (*p >= 0x80) {
            RS_CHECK(0, "%s: ASCII mode wrote byte 0x%02x at offset %ld", snap, *p, (long)(p - (const unsigned char *)a));
            break;
        }
    if (ascii_snap) snapshot(ascii_snap, a);
    rs_view_screen_free(s);
    return t;
}

static const rs_view_run ring_run = {"r1", "collective", "ring", "shm", 4, 0, 0, -1};
static const rs_view_run ddp_run = {"r2", "train", "ddp", "shm", 4, 6, 1, -1};

static void test_ring(void)
{
    /* mid-operation: 19 lines in, the ranks are at steps 3 and 4 of 6 */
    rs_view_model *vm = load("ring4.lines", 19, &ring_run);
    RS_CHECK(vm->coll.active && vm->coll.steps == 6, "ring mid: active %d steps %d", vm->coll.active, vm->coll.steps);
    char *a = draw(vm, 80, 24, "ring4-mid-80x24.txt", NULL);
    char *b = draw(vm, 160, 48, "ring4-mid-160x48.txt", NULL);
    RS_CHECK(strstr(a, "of 6") && strstr(b, "of 6"), "ring mid: no 'step k of 6'");
    RS_CHECK(strstr(b, "r0 -c1-> r1"), "ring mid: no move of rank 0 listed");
    RS_CHECK(strstr(a, "moved 4.25 MiB") || strstr(a, "moved"), "ring mid: no bytes moved");
    free(a);
    free(b);
    rs_view_model_free(vm);

    vm = load("ring4.lines", -1, &ring_run);
    RS_CHECK(!vm->coll.active && vm->coll.ended == 4 && vm->coll.algbw > 0, "ring end: ended %d algbw %g",
             vm->coll.ended, vm->coll.algbw);
    RS_CHECK(vm->coll.moved == 24ull * 262144, "ring end: moved %llu bytes, want 6 steps x 4 ranks x 256 KiB",
             (unsigned long long)vm->coll.moved);
    RS_CHECK_CLOSE(vm->coll.busbw, vm->coll.algbw * 1.5, 1e-12, 1e-9, "busbw = algbw * 2(n-1)/n");
    a = draw(vm, 80, 24, "ring4-end-80x24.txt", "ring4-end-80x24-ascii.txt");
    b = draw(vm, 160, 48, "ring4-end-160x48.txt", NULL);
    RS_CHECK(strstr(b, "busbw") && strstr(b, "[r0] rank 0: in"), "ring end: no busbw or rank-prefixed log");
    free(a);
    free(b);
    rs_view_model_free(vm);
}

static void test_ddp(void)
{
    rs_view_model *vm = load("ddp4.lines", 112, &ddp_run);
    char *a = draw(vm, 80, 24, "ddp4-mid-80x24.txt", NULL);
    char *b = draw(vm, 160, 48, "ddp4-mid-160x48.txt", NULL);
    free(a);
    free(b);
    rs_view_model_free(vm);

    vm = load("ddp4.lines", -1, &ddp_run);
    for (int r = 0; r < 4; r++) {
        RS_CHECK(vm->ranks[r].step == 6 && vm->ranks[r].state == RS_VIEW_ST_DONE && vm->ranks[r].n_loss == 6,
                 "ddp rank %d: step %lld state %d losses %d", r, (long long)vm->ranks[r].step, vm->ranks[r].state,
                 vm->ranks[r].n_loss);
        RS_CHECK(vm->ranks[r].has_mem && vm->ranks[r].live[RS_POOL_PARAMS] == 940608, "ddp rank %d params bytes", r);
    }
    a = draw(vm, 80, 24, "ddp4-end-80x24.txt", "ddp4-end-80x24-ascii.txt");
    b = draw(vm, 160, 48, "ddp4-end-160x48.txt", "ddp4-end-160x48-ascii.txt");
    /* the timeline shows the phases; the rank panes the bytes */
    RS_CHECK(strstr(a, "FB") || strstr(a, "Fb") || strstr(a, "fb"), "ddp 80x24: no forward then backward");
    RS_CHECK(strstr(b, "C"), "ddp 160x48: no communication");
    RS_CHECK(strstr(b, "919 KiB") && strstr(b, "1.79 MiB"), "ddp 160x48: no pool bytes in the rank boxes");
    RS_CHECK(strstr(b, "rank 3") && strstr(a, "r3"), "ddp: rank panes");
    free(a);
    free(b);
    rs_view_model_free(vm);
}

/* Tensor parallel on 2 ranks (gpt layers=2: two split pairs a block, an all-reduce in each one's forward
 * and backward): the collective pane counts the step's all-reduces with their numbers, not only the
 * last one. tensor2.lines: 2 ranks by hand as merge_lines.py says, `ringside --worker train "spec=gpt
 * layers=2 heads=2 dim=16 ctx=16 vocab=50" data=text:builtin,ctx=16 steps=3 batch=8 mode=tensor eval=0`. */
static void test_tensor(void)
{
    static const rs_view_run tp_run = {"r3", "train", "tensor", "shm", 2, 3, 1, -1};
    rs_view_model *vm = load("tensor2.lines", -1, &tp_run);
    for (int r = 0; r < 2; r++)
        RS_CHECK(vm->ranks[r].comm_n == 8 && vm->ranks[r].comm_lo == 0 && vm->ranks[r].comm_hi == 7 &&
                 vm->ranks[r].comm_sum_bytes == 8 * 8192ull && vm->ranks[r].comm_step == 2,
                 "tensor rank %d: %d all-reduces #%d-%d, %llu bytes in step %lld; want 8, #0-7, 64 KiB, step 2", r,
                 vm->ranks[r].comm_n, vm->ranks[r].comm_lo, vm->ranks[r].comm_hi,
                 (unsigned long long)vm->ranks[r].comm_sum_bytes, (long long)vm->ranks[r].comm_step);
    char *a = draw(vm, 80, 24, "tensor2-end-80x24.txt", NULL);
    char *b = draw(vm, 160, 48, "tensor2-end-160x48.txt", NULL);
    RS_CHECK(strstr(a, "r0 all_reduce x8 #0-7") && strstr(b, "r1 all_reduce x8 #0-7  64.0 KiB"),
             "tensor: the collective pane lists the step's 8 all-reduces:\n%s", b);
    free(a);
    free(b);
    rs_view_model_free(vm);
}

static int overlap(rs_view_rect a, rs_view_rect b)
{
    if (a.w <= 0 || a.h <= 0 || b.w <= 0 || b.h <= 0) return 0;
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

static void test_layout(void)
{
    int bad = 0;
    for (int w = 80; w <= 200 && bad < 5; w++)
        for (int h = 24; h <= 60 && bad < 5; h++)
            for (int n = 1; n <= 16 && bad < 5; n++) {
                rs_view_layout l = rs_view_layout_for(w, h, n);
                rs_view_rect r[5] = {l.header, l.ranks, l.coll, l.timeline, l.log};
                bool ok = !l.too_small;
                for (int i = 0; i < 5; i++) {
                    ok = ok && r[i].x >= 0 && r[i].y >= 0 && r[i].w >= 0 && r[i].h >= 0 && r[i].x + r[i].w <= w &&
                         r[i].y + r[i].h <= h;
                    for (int j = i + 1; j < 5; j++) ok = ok && !overlap(r[i], r[j]);
                }
                /* every pane gets a usable size on a screen we claim to support */
                ok = ok && l.ranks.h >= 2 && l.coll.h >= 4 && l.coll.w >= 30 && l.timeline.h >= 3 && l.log.h >= 3;
                ok = ok && (l.boxes ? l.boxes == (n < 8 ? n : 8) : 1);
                if (!ok) {
                    bad++;
                    RS_CHECK(0, "layout %dx%d world %d: header %d,%d %dx%d ranks %d,%d %dx%d coll %d,%d %dx%d "
                                "timeline %d,%d %dx%d log %d,%d %dx%d", w, h, n, r[0].x, r[0].y, r[0].w, r[0].h,
                             r[1].x, r[1].y, r[1].w, r[1].h, r[2].x, r[2].y, r[2].w, r[2].h, r[3].x, r[3].y, r[3].w,
                             r[3].h, r[4].x, r[4].y, r[4].w, r[4].h);
                }
            }
    RS_CHECK(rs_view_layout_for(79, 24, 4).too_small && rs_view_layout_for(80, 23, 4).too_small, "too small");
    rs_view_model *vm = rs_view_model_new(NULL);
    rs_view_screen *s = rs_view_screen_new(60, 20, NULL);
    rs_view_opts o = rs_view_opts_detect("xterm", NULL, true);
    rs_view_draw(s, vm, 0, &o);
    RS_CHECK(strstr(rs_view_screen_text(s), "terminal too small: need 80x24"), "small screen message");
    /* 16 ranks from 80x24 to 200x60 draw without writing outside (ASan) and name the last rank somewhere */
    rs_view_run run = {"r3", "train", "ddp", "shm", 16, 10, 1, 0};
    rs_view_set_run(vm, &run);
    for (int w = 80; w <= 200; w += 40)
        for (int h = 24; h <= 60; h += 12) {
            rs_view_screen_resize(s, w, h, NULL);
            rs_view_draw(s, vm, 1, &o);
            RS_CHECK(strstr(rs_view_screen_text(s), "world 16"), "%dx%d: header", w, h);
        }
    rs_view_screen_free(s);
    rs_view_model_free(vm);
}

/* The header and the legends: a run whose ranks have said nothing yet is starting, not done, and its
 * time runs from the launch; a bench shows its sizes and rows; a training run its plan and ETA. */
static void test_header(void)
{
    rs_view_screen *s = rs_view_screen_new(80, 24, NULL);
    rs_view_opts o = rs_view_opts_detect("xterm-256color", NULL, true);
    rs_view_model *vm = rs_view_model_new(NULL);
    rs_view_run bench = {"r7", "bench", NULL, "shm", 2, 5, 0, 100.0};
    rs_view_set_run(vm, &bench);
    rs_view_draw(s, vm, 102.5, &o);
    const char *t = rs_view_screen_text(s);
    RS_CHECK(strstr(t, "elapsed 2.50s") && !strstr(t, "done"), "silent ranks: elapsed from the launch, not done:\n%s", t);
    RS_CHECK(strstr(t, "? starting") && !strstr(t, "waiting"), "silent ranks are starting:\n%s", t);
    RS_CHECK(strstr(t, "starting ranks 0/2"), "silent ranks counted in the header:\n%s", t);
    RS_CHECK(strstr(t, "first size running"), "bench before its first row:\n%s", t);
    /* three of five sizes done (rank 0's @bench lines, as the worker writes them) */
    for (int i = 0; i < 3; i++) {
        rs_bench_row row = {.op = RS_OP_ALL_REDUCE, .bytes = 1024ull << i, .count = 256ull << i, .dtype = RS_F32,
                            .redop = RS_SUM, .time_us = 10.0 * (i + 1), .algbw = 0.1 * (i + 1), .busbw = 0.1 * (i + 1),
                            .wrong = 0, .iters = 100};
        char line[256];
        rs_wire_format_bench(line, sizeof line, &row);
        RS_CHECK(rs_view_feed_line(vm, 0, line), "@bench line taken: %s", line);
    }
    rs_view_draw(s, vm, 104.0, &o);
    t = rs_view_screen_text(s);
    RS_CHECK(strstr(t, "bench all_reduce  size 3 of 5  last 4.00 KiB: busbw 0.30 GB/s"), "bench header:\n%s", t);
    RS_CHECK(strstr(t, "C comm") && !strstr(t, "starting"), "bench: the ranks are at work:\n%s", t);
    RS_CHECK(strstr(t, "8.00 KiB running") && strstr(t, "4.00 KiB       30.0   0.30   0.30"), "bench pane:\n%s", t);
    RS_CHECK(!strstr(t, "done"), "bench under way is not done:\n%s", t);
    snapshot("bench2-80x24.txt", t);
    rs_view_screen_resize(s, 160, 48, NULL);
    rs_view_draw(s, vm, 104.0, &o);
    snapshot("bench2-160x48.txt", rs_view_screen_text(s));
    rs_view_model_free(vm);

    /* training: "step N/TOTAL  epoch E/EPOCHS  ETA" from the plan the REPL passes; the legends */
    rs_view_run plan = {"r2", "train", "ddp", "shm", 4, 18, 3, -1};
    /* while ranks start: as many counted as have spoken in the stream's first lines */
    for (int lines = 1; lines <= 40; lines += 13) {
        char path[1024], want[64], buf[256];
        snprintf(path, sizeof path, "%s/ddp4.lines", srcdir);
        FILE *f = fopen(path, "r");
        unsigned heard = 0;
        for (int i = 0; f && i < lines && fgets(buf, sizeof buf, f); i++) heard |= 1u << (atoi(buf) & 31);
        if (f) fclose(f);
        int n = __builtin_popcount(heard);
        snprintf(want, sizeof want, n < 4 ? "starting ranks %d/4" : "step ", n);
        vm = load("ddp4.lines", lines, &plan);
        rs_view_draw(s, vm, vm->t_last, &o);
        t = rs_view_screen_text(s);
        RS_CHECK(strstr(t, want) && (n < 4 || !strstr(t, "starting ranks")), "%d lines, %d ranks heard: '%s':\n%s",
                 lines, n, want, t);
        rs_view_model_free(vm);
    }
    vm = load("ddp4.lines", 112, &plan);
    rs_view_screen_resize(s, 80, 24, NULL);
    rs_view_draw(s, vm, vm->t_last, &o);
    t = rs_view_screen_text(s);
    RS_CHECK(strstr(t, "step 2/18  epoch 1/3  ETA "), "training header with the plan:\n%s", t);
    RS_CHECK(strstr(t, "D data") && strstr(t, "S scr"), "80x24 legends explain D and S:\n%s", t);
    rs_view_screen_resize(s, 160, 48, NULL);
    rs_view_draw(s, vm, vm->t_last, &o);
    t = rs_view_screen_text(s);
    RS_CHECK(strstr(t, "D data") && strstr(t, "S scratch"), "160x48 legends explain D and S:\n%s", t);
    rs_view_model_free(vm);
    rs_view_screen_free(s);
}

/* step=1: the ranks wait for a key after reporting each step; those waits are not the collective's
 * time, so the bandwidth is the same as without them. */
static void test_held(void)
{
    rs_view_model *vm = rs_view_model_new(NULL);
    rs_view_run run = {"r4", "collective", NULL, "shm", 2, 0, 0, -1};
    rs_view_set_run(vm, &run);
    size_t bytes = 1 << 20;
    for (int r = 0; r < 2; r++)
        rs_view_feed_event(vm, &(rs_pg_event){.kind = RS_PG_EV_BEGIN, .op = RS_OP_ALL_REDUCE, .algo = RS_ALGO_RING,
                                              .coll = 1, .rank = r, .peer = -1, .bytes = bytes, .t = 1.000});
    for (int k = 0; k < 2; k++) {
        for (int r = 0; r < 2; r++) /* step k reported at 1.001 (then 3.002), held until the key at 3.0 (5.0) */
            rs_view_feed_event(vm, &(rs_pg_event){.kind = RS_PG_EV_STEP, .op = RS_OP_ALL_REDUCE,
                                                  .algo = RS_ALGO_RING, .coll = 1, .step = k, .steps = 2, .rank = r,
                                                  .peer = 1 - r, .chunk = r, .bytes = bytes / 2,
                                                  .t = k ? 3.002 : 1.001});
        rs_view_feed_release(vm, 1, k, k ? 5.0 : 3.0);
    }
    for (int r = 0; r < 2; r++)
        rs_view_feed_event(vm, &(rs_pg_event){.kind = RS_PG_EV_END, .op = RS_OP_ALL_REDUCE, .algo = RS_ALGO_RING,
                                              .coll = 1, .rank = r, .peer = -1, .bytes = bytes, .t = 5.003});
    RS_CHECK(!vm->coll.active, "held: the collective ended");
    RS_CHECK_CLOSE(vm->coll.held, 3.997, 1e-9, 1e-9, "held: the waits for keys");
    RS_CHECK_CLOSE(vm->coll.algbw, (double)bytes / 0.006 / 1e9, 1e-6, 1e-9, "held: algbw over the working time");
    rs_view_model_free(vm);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void test_junk(void)
{
    rs_view_model *vm = rs_view_model_new(NULL);
    rs_view_set_run(vm, &ddp_run);
    static const char *const junk[] = {
        "@ev", "@ev s", "@ev s all_reduce ring 1 0 6 0 1 0 8 0", "@ev s all_reduce ring 1 0 6 99999 1 0 8 0 1.0",
        "@ev s all_reduce ring 1 0 6 -5 1 0 8 0 1.0", "@ev x all_reduce ring 1 0 6 0 1 0 8 0 1.0",
        "@ev s all_reduce ring 1 0 6 0 1 0 8 0 nan", "@phase 0 1 forward 2.0 1.0", "@phase 0 1 dancing 1.0 2.0",
        "@phase 70 1 forward 1.0 2.0", "@mem 0 1 1 2 3", "@step 0 1 0 nan 0.1 100", "@step -1 1 0 1 0.1 100",
        "@comm 0 1 all_reduce 0 100 inf 2", "@", "@@@@", "@done", "\xff\xfe\xc3", "plain \x1b[31mred\x1b[0m",
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) rs_view_feed_line(vm, 0, junk[i]);
    RS_CHECK(vm->ignored >= 12, "junk ignored: %llu", (unsigned long long)vm->ignored);
    RS_CHECK(vm->dropped >= 1, "rank 99999/70 dropped: %llu", (unsigned long long)vm->dropped);
    RS_CHECK(vm->ranks[0].n_loss == 1, "a NaN loss is kept (and drawn as '!')");

    /* mutations of the real lines: bytes flipped, cut, digits changed; nothing may crash or leak */
    char path[1024];
    snprintf(path, sizeof path, "%s/ddp4.lines", srcdir);
    char *all = slurp(path);
    RS_CHECK(all != NULL, "read %s", path);
    rs_view_screen *s = rs_view_screen_new(160, 48, NULL);
    rs_view_opts o = rs_view_opts_detect("xterm", NULL, true);
    for (int round = 0; round < 3000 && all; round++) {
        size_t len = strlen(all);
        size_t at = next() % len;
        while (at > 0 && all[at - 1] != '\n') at--;
        const char *nl = strchr(all + at, '\n');
        size_t ll = nl ? (size_t)(nl - (all + at)) : strlen(all + at);
        char line[512];
        if (ll >= sizeof line) ll = sizeof line - 1;
        memcpy(line, all + at + 2, ll > 2 ? ll - 2 : 0); /* without the "R " the merge put in front */
        line[ll > 2 ? ll - 2 : 0] = 0;
        size_t n = strlen(line);
        for (int k = 0; k < 3 && n; k++) {
            size_t p = next() % n;
            switch (next() % 4) {
            case 0: line[p] = (char)(next() & 0xff); break;
            case 1: line[p] = (char)('0' + next() % 10); break;
            case 2: line[p] = 0; break;
            case 3: line[p] = '-'; break;
            }
            if (line[p] == 0) break;
        }
        rs_view_feed_line(vm, (int)(next() % 6) - 1, line);
        if (round % 500 == 0) rs_view_draw(s, vm, vm->t_last, &o);
    }
    rs_view_draw(s, vm, vm->t_last, &o);
    /* bounded: the log keeps its last RS_VIEW_LOG_N lines, the spans their ring */
    for (int i = 0; i < 1000; i++) rs_view_feed_log(vm, i % 4, "a log line");
    RS_CHECK(vm->n_log == RS_VIEW_LOG_N, "log lines kept: %d", vm->n_log);
    for (int i = 0; i < 3 * RS_VIEW_SPAN_N; i++) {
        char l[128];
        snprintf(l, sizeof l, "@phase 1 %d forward %d.0 %d.5", i, i, i);
        rs_view_feed_line(vm, 1, l);
    }
    RS_CHECK(vm->ranks[1].n_span == RS_VIEW_SPAN_N && rs_view_span_at(&vm->ranks[1], 0)->step == 3 * RS_VIEW_SPAN_N - 1,
             "span ring");
    rs_view_draw(s, vm, vm->t_last, &o);
    rs_view_screen_free(s);
    free(all);
    rs_view_model_free(vm);
}

/* ---- the data pane: a 4-rank ring all_reduce's values after each step (`collective ... step=1`) */

/* Which algorithm step a recorded line belongs to: a BEGIN and step k's event and values are stage k
 * (what the ranks show while they wait for step k's key); an END, its values, the ranks' result lines
 * and @check close the operation (stage `steps`). -1: a line of no stage. */
static int stage_of(const char *line, int steps)
{
    const char *p = strchr(line, ' ');
    if (!p) return -1;
    p++;
    rs_pg_event ev;
    rs_data_line d;
    if (rs_wire_parse_event(p, &ev)) return ev.kind == RS_PG_EV_STEP ? ev.step : ev.kind == RS_PG_EV_BEGIN ? 0 : steps;
    if (rs_wire_parse_data(p, &d)) return d.done;
    return steps;
}

/* The model as it stands when every rank has reported step `stage` and waits there for the key:
 * the recorded lines of stages up to it, in the order they came. */
static rs_view_model *load_stage(const char *stream, int stage, int steps, const rs_view_run *run)
{
    rs_view_model *vm = rs_view_model_new(NULL);
    RS_CHECK(vm != NULL, "model_new");
    if (!vm) exit(1);
    rs_view_set_run(vm, run);
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%s/%s", srcdir, stream);
    FILE *f = fopen(path, "r");
    RS_CHECK(f != NULL, "cannot read %s", path);
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (stage_of(line, steps) > stage) continue;
        char *end;
        long rank = strtol(line, &end, 10);
        rs_view_feed_line(vm, (int)rank, end + 1);
    }
    if (f) fclose(f);
    return vm;
}

/* The serial reference: what every rank's buffer of n elements holds after `stage` steps of the ring
 * (inputs 1 + r + 9i, as the worker fills them): in reduce-scatter step s rank r adds the block r-s-1
 * of rank r-1 into its own, in all-gather step s it copies block r-s of rank r-1. x: (W, n). */
static void ring_reference(double *x, int W, size_t n, int stage)
{
    double *old = malloc(sizeof *old * (size_t)W * n);
    for (int r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) x[(size_t)r * n + i] = 1 + r + 9 * (double)(i % 1000);
    for (int s = 0; s < stage && old; s++) {
        memcpy(old, x, sizeof *old * (size_t)W * n);
        bool gather = s >= W - 1;
        int g = gather ? s - (W - 1) : s;
        for (int r = 0; r < W; r++) {
            int prev = (r - 1 + W) % W, b = ((gather ? r - g : r - g - 1) % W + W) % W;
            for (size_t i = n * (size_t)b / (size_t)W; i < n * (size_t)(b + 1) / (size_t)W; i++)
                x[(size_t)r * n + i] = gather ? old[(size_t)prev * n + i] : old[(size_t)r * n + i] + old[(size_t)prev * n + i];
        }
    }
    free(old);
}

/* UTF-8 code points from p to q (the screen's columns: every glyph it draws is one column wide). */
static int cols_between(const char *p, const char *q)
{
    int n = 0;
    for (; p < q; p++) n += ((unsigned char)*p & 0xC0) != 0x80;
    return n;
}

static const char *skip_cols(const char *p, int n)
{
    while (*p && *p != '\n' && n > 0) {
        p++;
        while (((unsigned char)*p & 0xC0) == 0x80) p++;
        n--;
    }
    return p;
}

/* The numbers on rank r's row of the data pane: under the pane's title ("data: ..."), the row whose
 * text at the title's column starts "rR ". -1 when there is none. */
static int row_numbers(const char *text, int r, double *out, int cap)
{
    const char *title = strstr(text, "data: ");
    if (!title) return -1;
    const char *bol = title;
    while (bol > text && bol[-1] != '\n') bol--;
    int col = cols_between(bol, title) - 2; /* a frame's corner or a title row's blank before it */
    char head[16];
    snprintf(head, sizeof head, "r%d ", r);
    for (const char *p = strchr(title, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        const char *at = skip_cols(p + 1, col < 0 ? 0 : col), *e = strchr(p + 1, '\n');
        const char *row = strstr(at, head);
        if (!row || (e && row > e) || cols_between(at, row) > 2) continue;
        int n = 0;
        for (const char *q = row + strlen(head); q < e && n < cap;) {
            if (!strncmp(q, "\xe2\x94\x82", 3)) { /* the frame's right edge ends the row */
                const char *nx = q + 3;
                if (nx == e) break;
            }
            char *end;
            double v = strtod(q, &end);
            if (end != q) out[n++] = v, q = end;
            else q++;
        }
        return n;
    }
    return -1;
}

static const rs_view_run ringdata_run = {"r5", "collective", NULL, "shm", 4, 0, 0, -1};

static void test_data(void)
{
    const int W = 4, K = 6;
    const size_t n = 8;
    double want[4 * 8];
    char label[96];
    static const char *const labels[] = {"input (nothing moved yet)", "after reduce-scatter step 1/3",
                                         "after reduce-scatter step 2/3", "after reduce-scatter step 3/3",
                                         "after all-gather step 1/3", "after all-gather step 2/3",
                                         "after all-gather step 3/3: the result"};
    rs_view_screen *s = rs_view_screen_new(160, 48, NULL);
    rs_view_opts o = rs_view_opts_detect("xterm-256color", "1", true);
    for (int stage = 0; stage <= K; stage++) {
        rs_view_model *vm = load_stage("ringdata4.lines", stage, K, &ringdata_run);
        ring_reference(want, W, n, stage);
        int done = -1;
        RS_CHECK(rs_view_has_data(vm, &done) && done == stage, "stage %d: the values say %d steps done", stage, done);
        rs_view_data_phase(label, sizeof label, RS_OP_ALL_REDUCE, RS_ALGO_RING, W, stage, K);
        RS_CHECK(!strcmp(label, labels[stage]), "stage %d: label '%s', want '%s'", stage, label, labels[stage]);
        for (int size = 0; size < 2; size++) {
            rs_view_screen_resize(s, size ? 160 : 80, size ? 48 : 24, NULL);
            rs_view_draw(s, vm, vm->t_last, &o);
            const char *t = rs_view_screen_text(s);
            RS_CHECK(strstr(t, labels[stage]) != NULL, "stage %d %dx%d: no '%s' on screen:\n%s", stage, s->w, s->h,
                     labels[stage], t);
            for (int r = 0; r < W; r++) {
                double got[16];
                int m = row_numbers(t, r, got, 16);
                /* the model holds what the rank sent; the screen shows what the model holds */
                bool same = m == (int)n;
                for (size_t i = 0; same && i < n; i++) same = got[i] == want[(size_t)r * n + i];
                for (size_t i = 0; i < n; i++)
                    RS_CHECK(vm->ranks[r].data.v[i] == want[(size_t)r * n + i], "stage %d rank %d element %zu: reported %g, "
                             "serial %g", stage, r, i, vm->ranks[r].data.v[i], want[(size_t)r * n + i]);
                RS_CHECK(same, "stage %d %dx%d rank %d: the row shows %d values, not the serial partial sums:\n%s", stage,
                         s->w, s->h, r, m, t);
            }
        }
        rs_view_model_free(vm);
    }
    rs_view_screen_free(s);

    /* snapshots: in the reduce-scatter, in the all-gather, the result */
    rs_view_model *vm = load_stage("ringdata4.lines", 2, K, &ringdata_run);
    char *a = draw(vm, 80, 24, "ringdata4-rs2-80x24.txt", NULL), *b = draw(vm, 160, 48, "ringdata4-rs2-160x48.txt", NULL);
    RS_CHECK(strstr(a, "step 3 of 6") && strstr(b, "r0 -c2-> r1"), "stage 2: the arrows show the next step");
    free(a), free(b);
    rs_view_model_free(vm);
    vm = load_stage("ringdata4.lines", 4, K, &ringdata_run);
    free(draw(vm, 80, 24, "ringdata4-ag1-80x24.txt", "ringdata4-ag1-80x24-ascii.txt"));
    free(draw(vm, 160, 48, "ringdata4-ag1-160x48.txt", NULL));
    rs_view_model_free(vm);
    vm = load_stage("ringdata4.lines", K, K, &ringdata_run);
    free(draw(vm, 80, 24, "ringdata4-end-80x24.txt", NULL));
    free(draw(vm, 160, 48, "ringdata4-end-160x48.txt", NULL));
    rs_view_model_free(vm);

    /* a long buffer (1001 floats): the first values of each chunk, the rest elided, chunks marked */
    vm = load_stage("ringdata4-long.lines", 1, K, &ringdata_run);
    a = draw(vm, 80, 24, "ringdata4-long-80x24.txt", "ringdata4-long-80x24-ascii.txt");
    b = draw(vm, 160, 48, "ringdata4-long-160x48.txt", NULL);
    double *x = malloc(sizeof *x * 4 * 1001);
    ring_reference(x, W, 1001, 1);
    for (int r = 0; r < W; r++) {
        double got[64];
        int m = row_numbers(b, r, got, 64);
        RS_CHECK(m >= 8, "long: rank %d shows %d values at 160x48", r, m);
        /* the row lists the head of each chunk in turn: every value shown is the serial one at its place */
        int shown = m / 4;
        for (int c = 0; c < 4 && m >= 8; c++)
            for (int i = 0; i < shown; i++) {
                size_t at = 1001 * (size_t)c / 4 + (size_t)i;
                RS_CHECK(got[c * shown + i] == x[(size_t)r * 1001 + at], "long rank %d chunk %d value %d: %g, serial %g",
                         r, c, i, got[c * shown + i], x[(size_t)r * 1001 + at]);
            }
    }
    RS_CHECK(strstr(a, "\xe2\x80\xa6") && strstr(a, "\xe2\x94\x82") && strstr(a, "1001 x f32"),
             "long: elided chunks and their edges are marked:\n%s", a);
    free(x);
    free(a), free(b);
    rs_view_model_free(vm);
}

/* The histogram rows after the first "batch size" head at or after `from`: each bin's first and last
 * size and its count; returns how many, their counts summed in *total. */
static int serve_bins(const char *from, int *lo, int *hi, uint64_t *total)
{
    const char *p = strstr(from, "batch size  batches run");
    int n = 0;
    *total = 0;
    while (p && (p = strchr(p, '\n')) && p[1]) {
        p++;
        const char *q = p;
        if (!strncmp(q, "\xe2\x94\x82", 3)) q += 3; /* a framed block's edge */
        else if (*q == '|') q++;
        int a, b, used = 0;
        if (sscanf(q, " %d%n", &a, &used) != 1) break;
        q += used;
        b = a;
        if (*q == '-' && sscanf(q + 1, "%d%n", &b, &used) == 1) q += 1 + used;
        while (*q == ' ') q++;
        if (*q != '#' && strncmp(q, "\xe2\x96\x88", 3)) break;
        while (*q == '#' || !strncmp(q, "\xe2\x96\x88", 3)) q += *q == '#' ? 1 : 3;
        unsigned long long c;
        if (sscanf(q, " %llu", &c) != 1) break;
        lo[n] = a, hi[n] = b, *total += c;
        n++;
    }
    return n;
}

/* The serve pane (`view serve`) from a summary made up here, so the snapshot is fixed: five versions
 * (one batching over 40 sizes, a GPT across 2 ranks, idle ones), at 80x24 (the histogram in ranges,
 * versions past the room as "+N more") and 160x48 (framed, all of them). The real server's figures are
 * checked by tests/serve/test_serve_pane.c. */
static void test_serve(void)
{
    uint64_t cnn_b[41] = {0}, gpt_b[2] = {0, 10};
    uint64_t batches = 0;
    for (int b = 1; b <= 40; b++) cnn_b[b] = (uint64_t)(b % 7 == 0 ? 0 : 1 + (b * 13) % 9), batches += cnn_b[b];
    char gpt_ranks[] = "rank 0: pipeline stage 0 of 2: layers 0-2, 6208 parameters here\n"
                       "rank 1: pipeline stage 1 of 2: layers 3-5, 6154 parameters here\n";
    rs_serve_summary_row rows[5] = {
        {.name = "cnn", .version = 1, .ok = 1200, .failed = 3, .samples = 1500, .batches = batches, .mean_us = 912,
         .queued = 5, .rate = 120.5, .p50_us = 812, .p99_us = 4100, .queue_p50_us = 350, .max_batch = 40,
         .batch_count = cnn_b, .ranks = ""},
        {.name = "gpt", .version = 2, .ok = 10, .samples = 10, .batches = 10, .mean_us = 52000, .rate = 1,
         .p50_us = 50000, .p99_us = 61000, .queue_p50_us = 40, .max_batch = 1, .batch_count = gpt_b,
         .ranks = gpt_ranks},
        {.name = "idle", .version = 1, .ranks = ""},
        {.name = "idle2", .version = 1, .ranks = ""},
        {.name = "idle3", .version = 3, .ranks = ""},
    };
    rs_serve_summary sum = {.repo = "/tmp/ringside-serve-TEST", .host = "127.0.0.1", .http_port = 8000,
                            .grpc_port = 8001, .metrics_port = -1, .n = 5, .rows = rows};
    static const struct { int w, h; const char *snap, *ascii; } sizes[] = {
        {80, 24, "serve-80x24.txt", "serve-80x24-ascii.txt"}, {160, 48, "serve-160x48.txt", NULL}};
    for (int k = 0; k < 2; k++) {
        int w = sizes[k].w, h = sizes[k].h;
        rs_view_screen *s = rs_view_screen_new(w, h, NULL);
        rs_view_opts color = rs_view_opts_detect("xterm-256color", NULL, true);
        rs_view_opts mono = rs_view_opts_detect("xterm-256color", "1", true);
        rs_view_opts dumb = rs_view_opts_detect("dumb", NULL, true);
        rs_view_draw_serve_frame(s, &sum, &color);
        char *t = strdup(rs_view_screen_text(s));
        rs_view_draw_serve_frame(s, &sum, &mono);
        RS_CHECK(!strcmp(t, rs_view_screen_text(s)), "serve %dx%d: NO_COLOR changed the text", w, h);
        for (int i = 0; i < w * h; i++)
            if (s->cells[i].color) {
                RS_CHECK(0, "serve %dx%d: NO_COLOR drew colour", w, h);
                break;
            }
        snapshot(sizes[k].snap, t);
        rs_view_draw_serve_frame(s, &sum, &dumb);
        const char *a = rs_view_screen_text(s);
        for (const unsigned char *p = (const unsigned char *)a; *p; p++)
            if (*p >= 0x80) {
                RS_CHECK(0, "serve %dx%d: ASCII mode wrote byte 0x%02x", w, h, *p);
                break;
            }
        if (sizes[k].ascii) snapshot(sizes[k].ascii, a);
        /* every batch the cnn ran is in its histogram, in bins that follow each other */
        int lo[64], hi[64];
        uint64_t total;
        int n = serve_bins(t, lo, hi, &total);
        RS_CHECK(n > 1 && total == batches && lo[0] >= 1 && hi[n - 1] <= 40, "serve %dx%d: %d bins hold %llu batches, "
                 "want %llu:\n%s", w, h, n, (unsigned long long)total, (unsigned long long)batches, t);
        for (int i = 1; i < n; i++) RS_CHECK(lo[i] > hi[i - 1], "serve %dx%d: bins overlap", w, h);
        RS_CHECK(strstr(t, "1200 ok / 3 failed") && strstr(t, "queued 5") && strstr(t, "120.5 requests/s") &&
                     strstr(t, "p99 4100 us") && strstr(t, "queue p50 350 us") && strstr(t, "121.5 requests/s"),
                 "serve %dx%d: the cnn's figures or the total rate:\n%s", w, h, t);
        RS_CHECK(strstr(t, "rank 0: pipeline stage 0 of 2") && strstr(t, "rank 1: pipeline stage 1 of 2"),
                 "serve %dx%d: the GPT's rank lines:\n%s", w, h, t);
        if (w == 80) RS_CHECK(n < 36 && strstr(t, "more model versions"), "serve 80x24: ranges and +N more:\n%s", t);
        else RS_CHECK(strstr(t, "idle3 v3") && !strstr(t, "more model versions"), "serve 160x48: all versions:\n%s", t);
        free(t);
        rs_view_screen_free(s);
    }
    /* a version taller than the screen (30 ranks, a line each): its first lines, then "+1 more" */
    char many[30 * 48] = "";
    for (int k = 0; k < 30; k++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "rank %d: pipeline stage %d of 30\n", k, k);
    rows[1].ranks = many;
    sum.rows = rows + 1, sum.n = 2;
    rs_view_screen *s = rs_view_screen_new(80, 24, NULL);
    rs_view_opts mono = rs_view_opts_detect("xterm-256color", "1", true);
    rs_view_draw_serve_frame(s, &sum, &mono);
    const char *t = rs_view_screen_text(s);
    RS_CHECK(strstr(t, "gpt v2") && strstr(t, "requests 10 ok") && strstr(t, "rank 0: pipeline stage 0 of 30") &&
                 !strstr(t, "rank 29:") && strstr(t, "+1 more model versions"), "serve: a version taller than 80x24:\n%s",
             t);
    rs_view_screen_free(s);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--update")) update = 1;
        else srcdir = argv[i];
    }
    test_layout();
    test_header();
    test_held();
    test_junk();
    test_ring();
    test_ddp();
    test_tensor();
    test_data();
    test_serve();
    return rs_test_finish("view");
}
