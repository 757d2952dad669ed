/* Ranks through an rsh agent (see remote.h). */
#define _GNU_SOURCE
#include "dist/launch/remote.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rs_remote_agent(char *buf, size_t cap)
{
    const char *a = getenv("RINGSIDE_RSH_AGENT");
    if (!a || !*a) a = getenv("OMPI_MCA_plm_rsh_agent");
    if (!a || !*a) a = "ssh";
    const char *end = strstr(a, " : "); /* Open MPI's "ssh : rsh": the first that exists; we take the first */
    size_t len = end ? (size_t)(end - a) : strlen(a), at = 0;
    int words = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && isspace((unsigned char)a[i])) i++;
        size_t s = i;
        while (i < len && !isspace((unsigned char)a[i])) i++;
        if (i == s) break;
        if (at + (i - s) + 1 > cap) return 0;
        memcpy(buf + at, a + s, i - s);
        at += i - s;
        buf[at++] = 0;
        words++;
    }
    return words;
}

/* s quoted for a POSIX shell into out (NULL: only counted): 'it'\''s'. Its length. */
static size_t quote(const char *s, char *out)
{
    size_t n = 0;
#define PUT(c) (out ? (void)(out[n] = (c)) : (void)0, n++)
    PUT('\'');
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            PUT('\'');
            PUT('\\');
            PUT('\'');
            PUT('\'');
        } else PUT(*p);
    }
    PUT('\'');
#undef PUT
    return n;
}

char **rs_remote_argv(const char *agent, int nwords, const char *host, const char *const *vars, const char *const *argv)
{
    int nv = 0, na = 0;
    while (vars && vars[nv]) nv++;
    while (argv[na]) na++;
    int argc = nwords + 2 + nv + na;
    size_t text = strlen(host) + 1 + 4;
    const char *w = agent;
    for (int i = 0; i < nwords; i++, w += strlen(w) + 1) text += strlen(w) + 1;
    for (int i = 0; i < nv; i++) text += quote(vars[i], NULL) + 1;
    for (int i = 0; i < na; i++) text += quote(argv[i], NULL) + 1;
    size_t ptrs = sizeof(char *) * (size_t)(argc + 1);
    char **out = malloc(ptrs + text); /* the caller's, one free() */
    if (!out) return NULL;
    char *p = (char *)out + ptrs;
    int k = 0;
    w = agent;
    for (int i = 0; i < nwords; i++, w += strlen(w) + 1) {
        out[k++] = p;
        p = stpcpy(p, w) + 1;
    }
    out[k++] = p;
    p = stpcpy(p, host) + 1;
    out[k++] = p;
    p = stpcpy(p, "env") + 1;
    for (int i = 0; i < nv + na; i++) {
        out[k++] = p;
        p += quote(i < nv ? vars[i] : argv[i - nv], p);
        *p++ = 0;
    }
    out[k] = NULL;
    return out;
}

rs_status rs_remote_rank_hosts(const char *list, int world, char ***out, rs_err *err)
{
    *out = NULL;
    size_t ptrs = sizeof(char *) * (size_t)(world + 1), text = strlen(list) + 1;
    char **h = calloc(1, ptrs + text); /* the caller's, one free() */
    if (!h) return rs_err_set(err, RS_ERR_NOMEM, "out of memory");
    char *names = memcpy((char *)h + ptrs, list, text);
    int r = 0;
    for (char *save = NULL, *tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(tok, ':');
        int n = colon ? atoi(colon + 1) : 1;
        if (colon) *colon = 0;
        for (int i = 0; i < n && r < world; i++) h[r++] = tok;
    }
    if (r != world) {
        free(h);
        return rs_err_set(err, RS_ERR_ARG, "the host list '%s' places %d of %d ranks", list, r, world);
    }
    *out = h;
    return RS_OK;
}
