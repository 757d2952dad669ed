/* The only part of the view that touches a terminal: copying a virtual screen into a curses window,
 * and the colour pairs the roles map to. The REPL's live loop owns initscr/endwin, the keyboard and
 * SIGWINCH; this file only blits a finished frame (wnoutrefresh; the caller does one doupdate). */
#ifndef RS_VIEW_VIEW_CURSES_H
#define RS_VIEW_VIEW_CURSES_H

#include <stdbool.h>

#include "screen.h"

/* Defines a colour pair per rs_view_color (pair number = role) when the terminal has colours; call
 * once after initscr (and start_color). Returns false when the terminal has none (draw with
 * opts.color false then). */
bool rs_view_curses_colors(void);
/* Copies s into win (a WINDOW*, as void* so this header needs no curses.h) from its top-left corner,
 * clipped to the window, then wnoutrefresh(win). Returns false if curses refused. */
bool rs_view_screen_to_curses(const rs_view_screen *s, void *win);
/* Whether the current locale's character set is UTF-8 (for rs_view_opts_detect). */
bool rs_view_locale_utf8(void);

#endif
