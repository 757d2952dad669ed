/* Running commands: one line (possibly `cmd; cmd`), a script file, or the interactive prompt. */
#ifndef RS_REPL_H
#define RS_REPL_H

#include "session.h"

/* Runs every command of one line; returns the number that failed. Each command is logged. */
int rs_repl_line(rs_session *s, const char *line);
/* Runs a script; stops at the first error unless s->keep_going. Returns the number of errors. */
int rs_repl_file(rs_session *s, const char *path);
/* The interactive prompt on GNU readline, until quit or Ctrl-D. history_path may be NULL. */
int rs_repl_interactive(rs_session *s, const char *history_path);

/* Where the built-in tutorials live (tutorials/ next to the source tree or installed data). */
const char *rs_repl_tutorial_dir(void);

#endif
