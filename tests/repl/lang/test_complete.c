/* Tab completion read off the command table (repl/complete.c), without a terminal: what the word at
 * the cursor may become. tests/repl/term/complete_test.py checks the same through readline in tmux. */
#include <stdio.h>
#include <string.h>

#include "complete.h"
#include "rs_test.h"

/* The candidates for the last word of line (the cursor at its end), joined by '|'. */
static const char *cands(const char *line, bool *files)
{
    static char out[4096];
    int start = (int)strlen(line);
    while (start > 0 && line[start - 1] != ' ') start--;
    rs_compl o;
    rs_complete(NULL, line, start, (int)strlen(line), &o);
    out[0] = 0;
    for (int i = 0; i < o.n; i++) {
        strncat(out, o.words[i], sizeof out - strlen(out) - 2);
        strcat(out, "|");
    }
    if (files) *files = o.files;
    rs_compl_clear(&o);
    return out;
}

static void want(const char *line, const char *expect, bool files)
{
    bool f = false;
    const char *got = cands(line, &f);
    RS_CHECK(!strcmp(got, expect) && f == files, "%-28s -> '%s'%s, want '%s'%s", line, got, f ? " +files" : "",
             expect, files ? " +files" : "");
}

int main(void)
{
    want("tra", "train |", false);
    want("train m on d ep", "epochs=|", false);
    want("train m on d opt=a", "opt=adam |opt=adamw |", false);          /* not opt=accum= */
    want("train m on d opt=", "opt=sgd |opt=adam |opt=adamw |", false);  /* values, not option names */
    want("train m on d mode=d", "mode=dp |mode=ddp |", false);
    want("train m on d eval=o", "eval=on |eval=off |", false);
    want("train m on d ckpt=", "", true);                                 /* files after ckpt= */
    want("train m on d lr=", "", false);                                 /* a number: nothing to offer */
    want("train m o", "on |", false);                                    /* the keyword */
    want("collective all_", "all_reduce |all_gather |all_to_all |", false);
    want("bench red", "reduce |reduce_scatter |", false);
    want("collective all_reduce alg", "algo=|", false);
    want("show ", "run |", false);                                       /* and the session's names */
    want("help tr", "train |", false);
    want("play to", "tour |", false);              /* the tutorials by name (tutorials/NN-NAME.ring) */
    want("play col", "collectives |collective-ops |", false);
    want("play r", "ranks |", false);
    want("play te", "tensor |", false);
    want("play ./", "", true);                     /* a path: a script of one's own */
    want("play tour a", "auto |", false);
    want("save m ", "", true);
    want("data x = ", "digits |fashion |idx |cifar |csv |text |n=|seed=|ctx=|", false); /* no layer names */
    want("data x = l", "", false);
    want("data x = idx ", "n=|seed=|ctx=|", true);
    want("data x = csv tr", "", true);
    want("data x = digits ", "n=|seed=|ctx=|", false);
    want("model m = seq li", "linear(|", false);
    want("model m = seq conv(8,3) r", "relu |res[ |", false);
    want("model m = onnx ", "seed=|device=|", true);
    want("model m = l", "", false);                                      /* layers come after seq */
    want("nosuch ", "", false);
    return rs_test_finish("complete");
}
