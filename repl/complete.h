/* Tab completion from the command table (complete.c); interactive.c wires it into readline. */
#ifndef RS_COMPLETE_H
#define RS_COMPLETE_H

#include <stdbool.h>

typedef struct rs_session rs_session;

typedef struct rs_compl {
    char **words;       /* replacements for the word at the cursor, each with what follows it
                           (" " after a finished word, nothing after "epochs=" or "linear(") */
    int n;
    bool files;         /* file names complete here too: file_pre followed by a path */
    char file_pre[80];  /* "ckpt=" for an option's value, "" for a word of its own */
    const char *const *exts; /* the files' endings to list (".onnx"), NULL-terminated; NULL: any file.
                                Folders are listed whatever they are called. */
} rs_compl;

/* Candidates for the word line[start, end) (the cursor at end; words are split at blanks only, so
 * `opt=a` is one word). s may be NULL (no session names). Returns o->n; free the words with rs_compl_clear. */
int rs_complete(const rs_session *s, const char *line, int start, int end, rs_compl *o);
void rs_compl_clear(rs_compl *o);

#endif
