/* The built-in tutorials: files NN-name.ring in the tutorials folder (rs_repl_tutorial_dir), each
 * opening with a comment line that says what it teaches. `play` lists and finds them, `help play` shows
 * the list, Tab completes their names. */
#ifndef RS_TUTORIALS_H
#define RS_TUTORIALS_H

#include "session.h"

typedef struct rs_tutorial {
    int number;          /* NN */
    char name[64];       /* what follows "NN-", without .ring: "tour", "collectives" */
    char path[1024];     /* folder/NN-name.ring */
    char summary[200];   /* the first comment line, without '#' */
} rs_tutorial;

/* The tutorials in dir, by number. Returns how many (0 when none or dir cannot be read) and sets *out
 * (caller frees; NULL with none). */
int rs_tutorials_list(const char *dir, rs_tutorial **out);

/* The tutorial a word names: its number ("2", "02"), its name ("ranks"), or its file name ("02-ranks",
 * "02-ranks.ring"); NULL when none. */
const rs_tutorial *rs_tutorials_find(const rs_tutorial *t, int n, const char *word);

/* Prints the list as `play` and `help play` show it, cut to the terminal's width. */
void rs_play_list(rs_session *s);

#endif
