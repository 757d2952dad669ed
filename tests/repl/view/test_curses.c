/* The one piece that needs curses: a frame drawn into the virtual screen, blitted into a real ncursesw
 * screen (a terminal of type xterm-256color writing to /dev/null), must read back cell by cell,
 * wide characters (sparkline blocks, frame lines) included. Skipped (77) when the terminfo entry is
 * missing. */
#define _XOPEN_SOURCE_EXTENDED 1
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include <ncurses.h>

#include "repl/view/render.h"
#include "repl/view/view_curses.h"
#include "rs_test.h"

int main(void)
{
    if (!setlocale(LC_ALL, "C.UTF-8")) RS_SKIP("no C.UTF-8 locale");
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    if (!out || !in) RS_SKIP("cannot open /dev/null");
    SCREEN *scr = newterm("xterm-256color", out, in);
    if (!scr) RS_SKIP("no terminfo entry for xterm-256color");
    resizeterm(24, 80);
    RS_CHECK(rs_view_locale_utf8(), "C.UTF-8 is UTF-8");
    bool colors = rs_view_curses_colors();

    rs_view_model *vm = rs_view_model_new(NULL);
    rs_view_run run = {"r1", "train", "ddp", "shm", 2, 4, 1, 0};
    rs_view_set_run(vm, &run);
    const char *lines[] = {"@phase 0 0 forward 0.10 0.20", "@phase 0 0 backward 0.20 0.40",
                           "@comm 0 0 all_reduce 0 4096 0.30 0.50", "@step 0 1 0 2.5 0.1 100",
                           "@step 0 2 0 2.0 0.1 100", "@phase 1 0 forward 0.10 0.25", "hello from rank 1"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) rs_view_feed_line(vm, i == 6 ? 1 : 0, lines[i]);
    rs_view_screen *s = rs_view_screen_new(80, 24, NULL);
    rs_view_opts o = rs_view_opts_detect("xterm-256color", NULL, true);
    o.color = o.color && colors;
    rs_view_draw(s, vm, 0.5, &o);
    RS_CHECK(rs_view_screen_to_curses(s, stdscr), "blit");
    doupdate();

    int wrong = 0;
    for (int y = 0; y < 24; y++)
        for (int x = 0; x < 80; x++) {
            cchar_t cc;
            wchar_t wc[CCHARW_MAX + 1];
            attr_t a;
            short pair;
            if (mvwin_wch(stdscr, y, x, &cc) == ERR || getcchar(&cc, wc, &a, &pair, NULL) == ERR) {
                wrong++;
                continue;
            }
            const rs_view_cell *c = rs_view_screen_at(s, x, y);
            if ((uint32_t)wc[0] != c->ch || (o.color && pair != c->color)) {
                if (wrong++ < 3) fprintf(stderr, "cell %d,%d: curses U+%04X pair %d, screen U+%04X colour %d\n", x, y,
                                         (unsigned)wc[0], pair, c->ch, c->color);
            }
        }
    RS_CHECK(wrong == 0, "%d cells differ between the virtual screen and curses", wrong);
    endwin();
    delscreen(scr);
    fclose(out);
    fclose(in);
    rs_view_screen_free(s);
    rs_view_model_free(vm);
    return rs_test_finish("view-curses");
}
