/* Blitting a virtual screen into ncursesw (view_curses.h). Wide-character curses (cchar_t, setcchar) so the
 * sparkline blocks and frame lines go out as the terminal's own characters. */
#define _XOPEN_SOURCE_EXTENDED 1
#include "view_curses.h"

#include <langinfo.h>
#include <locale.h>
#include <string.h>
#include <wchar.h>

#include <ncurses.h>

bool rs_view_curses_colors(void)
{
    if (!has_colors()) return false;
    if (start_color() == ERR) return false;
    use_default_colors();
    static const struct { int role, fg; } map[] = {
        {RS_VIEW_C_DATA, COLOR_WHITE},   {RS_VIEW_C_FORWARD, COLOR_GREEN}, {RS_VIEW_C_BACKWARD, COLOR_BLUE},
        {RS_VIEW_C_COMM, COLOR_MAGENTA}, {RS_VIEW_C_OPTIM, COLOR_YELLOW},  {RS_VIEW_C_IDLE, COLOR_WHITE},
        {RS_VIEW_C_DONE, COLOR_CYAN},    {RS_VIEW_C_POOL0 + 0, COLOR_BLUE},   {RS_VIEW_C_POOL0 + 1, COLOR_RED},
        {RS_VIEW_C_POOL0 + 2, COLOR_YELLOW}, {RS_VIEW_C_POOL0 + 3, COLOR_GREEN}, {RS_VIEW_C_POOL0 + 4, COLOR_MAGENTA},
        {RS_VIEW_C_POOL0 + 5, COLOR_CYAN},   {RS_VIEW_C_POOL0 + 6, COLOR_WHITE}, {RS_VIEW_C_TITLE, COLOR_CYAN},
        {RS_VIEW_C_DIM, COLOR_WHITE},    {RS_VIEW_C_WARN, COLOR_RED},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].role < COLOR_PAIRS) init_pair((short)map[i].role, (short)map[i].fg, -1);
    return true;
}

bool rs_view_screen_to_curses(const rs_view_screen *s, void *win)
{
    WINDOW *w = win;
    if (!w) return false;
    int mh, mw;
    getmaxyx(w, mh, mw);
    for (int y = 0; y < s->h && y < mh; y++)
        for (int x = 0; x < s->w && x < mw; x++) {
            const rs_view_cell *c = rs_view_screen_at(s, x, y);
            wchar_t wc[2] = {(wchar_t)c->ch, 0};
            attr_t a = 0;
            if (c->attr & RS_VIEW_A_BOLD) a |= A_BOLD;
            if (c->attr & RS_VIEW_A_REVERSE) a |= A_REVERSE;
            if (c->attr & RS_VIEW_A_UNDERLINE) a |= A_UNDERLINE;
            cchar_t cc;
            short pair = c->color < COLOR_PAIRS ? c->color : 0;
            if (setcchar(&cc, wc, a, pair, NULL) == ERR) continue;
            /* the bottom-right cell scrolls some terminals when written with add: insert there */
            if (y == mh - 1 && x == mw - 1) mvwins_wch(w, y, x, &cc);
            else mvwadd_wch(w, y, x, &cc);
        }
    return wnoutrefresh(w) != ERR;
}

bool rs_view_locale_utf8(void)
{
    const char *cs = nl_langinfo(CODESET);
    return cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
}
