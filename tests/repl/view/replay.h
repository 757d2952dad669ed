/* Replays a recorded stream ("RANK LINE" per line, see merge_lines.py) into a view model: what the
 * REPL will do with the ranks' live lines, minus the pipes. Shared by the test and the benchmark. */
#ifndef RS_TEST_VIEW_REPLAY_H
#define RS_TEST_VIEW_REPLAY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl/view/model.h"

/* Feeds the first max_lines lines of path (max_lines < 0: all); returns the lines read, -1 when the
 * file cannot be opened. A line with no rank in front is fed as the REPL's own (-1). */
static inline int rs_test_replay(rs_view_model *vm, const char *path, int max_lines)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while ((max_lines < 0 || n < max_lines) && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *end;
        long rank = strtol(line, &end, 10);
        if (end == line || *end != ' ') rs_view_feed_line(vm, -1, line);
        else rs_view_feed_line(vm, (int)rank, end + 1);
        n++;
    }
    fclose(f);
    return n;
}

#endif
