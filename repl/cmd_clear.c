/* `clear`: a fresh screen for the next part of a lesson. The sequence comes from the terminal's
 * terminfo entry (ncurses' tigetstr, as clear(1) does); output that is not a terminal (scripts played
 * into a file or a pipe, the tests) gets nothing at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curses.h>
#include <term.h>

#include "session.h"
#include "wrap.h"

int rs_cmd_clear(rs_session *s, const rs_call *c)
{
    (void)c;
    int fd = rs_wrap_fd(s->out);
    const char *term = getenv("TERM");
    if (fd < 0 || !isatty(fd) || !term || !*term || !strcmp(term, "dumb")) return 0;
    /* a terminal of our own for the lookup, the current one (a live view's, if any) put back after */
    TERMINAL *saved = cur_term;
    int err = 0;
    if (setupterm(NULL, fd, &err) != OK) {
        set_curterm(saved);
        return 0; /* no terminfo entry for TERM: leave the screen as it is */
    }
    const char *cl = tigetstr("clear");
    if (cl && cl != (char *)-1) {
        fflush(s->out);
        fputs(cl, s->out);
        fflush(s->out);
        rs_wrap_line_start(s->out); /* the cursor is home */
    }
    del_curterm(cur_term);
    set_curterm(saved);
    return 0;
}
