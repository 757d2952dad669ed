/* The tutorials folder read as a list (see tutorials.h). */
#include "tutorials.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl.h"

/* The first comment line of path, without '#' and blanks around it; "" when it has none. */
static void first_comment(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '\n' || !*p) continue;
        if (*p != '#') break; /* a command before any comment: no summary */
        p++;
        while (*p == ' ' || *p == '\t' || *p == '#') p++;
        size_t n = strcspn(p, "\r\n");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        snprintf(out, cap, "%.*s", (int)n, p);
        break;
    }
    fclose(f);
}

static int by_number(const void *a, const void *b)
{
    const rs_tutorial *x = a, *y = b;
    if (x->number != y->number) return (x->number > y->number) - (x->number < y->number);
    return strcmp(x->name, y->name);
}

int rs_tutorials_list(const char *dir, rs_tutorial **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    rs_tutorial *t = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *f = e->d_name;
        size_t len = strlen(f);
        int digits = 0;
        while (isdigit((unsigned char)f[digits])) digits++;
        /* NN-name.ring */
        if (!digits || digits > 4 || f[digits] != '-' || len < (size_t)digits + 7 || strcmp(f + len - 5, ".ring"))
            continue;
        if (n == cap) {
            int nc = cap ? 2 * cap : 16;
            rs_tutorial *nt = realloc(t, (size_t)nc * sizeof *nt);
            if (!nt) break;
            t = nt;
            cap = nc;
        }
        rs_tutorial *x = &t[n++];
        x->number = atoi(f);
        snprintf(x->name, sizeof x->name, "%.*s", (int)(len - (size_t)digits - 6), f + digits + 1);
        snprintf(x->path, sizeof x->path, "%s/%s", dir, f);
        first_comment(x->path, x->summary, sizeof x->summary);
    }
    closedir(d);
    if (n) qsort(t, (size_t)n, sizeof *t, by_number);
    *out = t;
    return n;
}

const rs_tutorial *rs_tutorials_find(const rs_tutorial *t, int n, const char *word)
{
    size_t wl = strlen(word);
    if (wl > 5 && !strcmp(word + wl - 5, ".ring")) wl -= 5;
    bool number = wl > 0;
    for (size_t i = 0; i < wl; i++) number &= isdigit((unsigned char)word[i]) != 0;
    for (int i = 0; i < n; i++) {
        if (number) {
            if (wl <= 4 && atoi(word) == t[i].number) return &t[i];
            continue;
        }
        if (strlen(t[i].name) == wl && !strncmp(t[i].name, word, wl)) return &t[i];
        const char *file = strrchr(t[i].path, '/');
        file = file ? file + 1 : t[i].path;
        if (strlen(file) == wl + 5 && !strncmp(file, word, wl)) return &t[i];
    }
    return NULL;
}

void rs_play_list(rs_session *s)
{
    rs_tutorial *t;
    int n = rs_tutorials_list(rs_repl_tutorial_dir(), &t);
    if (!n) {
        fprintf(s->out, "no tutorials in %s (RINGSIDE_TUTORIALS names another folder)\n", rs_repl_tutorial_dir());
        return;
    }
    fprintf(s->out, "tutorials (`play N` or `play NAME`; `play N auto` plays without waiting):\n");
    for (int i = 0; i < n; i++) {
        /* within 80 columns, a projector's terminal: 21 for the number and name, 59 for the summary */
        bool cut = strlen(t[i].summary) > 59;
        fprintf(s->out, "  %2d  %-14s %.*s%s\n", t[i].number, t[i].name, cut ? 56 : 59, t[i].summary, cut ? "..." : "");
    }
    free(t);
}
