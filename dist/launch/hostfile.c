/* DeepSpeed's hostfile (see hostfile.h): its regex `^(\S+)\s+slots=(\d+)` on each stripped line that is
 * neither empty nor a comment, written out by hand with its messages. */
#define _GNU_SOURCE
#include "dist/launch/hostfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One stripped line: 1 with host and slots, 0 when it does not match DeepSpeed's pattern. */
static int match(const char *line, size_t len, char *host, size_t cap, int *slots)
{
    size_t h = 0;
    while (h < len && !isspace((unsigned char)line[h])) h++;
    size_t p = h;
    while (p < len && isspace((unsigned char)line[p])) p++;
    if (h == 0 || p == h || h >= cap || len - p < 7 || strncmp(line + p, "slots=", 6) || !isdigit((unsigned char)line[p + 6]))
        return 0;
    long long v = 0;
    for (size_t i = p + 6; i < len && isdigit((unsigned char)line[i]) && v < 1000000; i++) v = v * 10 + (line[i] - '0');
    memcpy(host, line, h);
    host[h] = 0;
    *slots = (int)v;
    return 1;
}

rs_status rs_hostfile_parse(const char *text, rs_hostfile *out, rs_err *err)
{
    *out = (rs_hostfile){0};
    int cap = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *s = p;
        p += len + (nl != NULL);
        while (len && isspace((unsigned char)*s)) s++, len--;
        while (len && isspace((unsigned char)s[len - 1])) len--;
        if (len == 0 || *s == '#') continue; /* a comment or an empty line */
        rs_hostfile_host hh;
        if (!match(s, len, hh.name, sizeof hh.name, &hh.slots)) {
            rs_hostfile_clear(out);
            return rs_err_set(err, RS_ERR_ARG, "Hostfile contains a bad entry: %.*s, unable to proceed with launching "
                              "(each line: HOST slots=N)", (int)(len > 200 ? 200 : len), s);
        }
        for (int i = 0; i < out->n; i++)
            if (!strcmp(out->hosts[i].name, hh.name)) {
                rs_hostfile_clear(out);
                return rs_err_set(err, RS_ERR_ARG, "Hostfile contains multiple entries for %s, unable to proceed with "
                                  "launching", hh.name);
            }
        if (out->n == cap) {
            cap = cap ? 2 * cap : 8;
            rs_hostfile_host *nh = realloc(out->hosts, sizeof *nh * (size_t)cap);
            if (!nh) {
                rs_hostfile_clear(out);
                return rs_err_set(err, RS_ERR_NOMEM, "hostfile: out of memory");
            }
            out->hosts = nh;
        }
        out->hosts[out->n++] = hh;
        out->slots += hh.slots;
    }
    if (out->n == 0)
        return rs_err_set(err, RS_ERR_ARG, "Hostfile is empty or not formatted correctly, unable to proceed with launching.");
    return RS_OK;
}

rs_status rs_hostfile_read(const char *path, rs_hostfile *out, rs_err *err)
{
    *out = (rs_hostfile){0};
    FILE *f = fopen(path, "r");
    if (!f) return rs_err_set(err, RS_ERR_IO, "hostfile %s: %s", path, strerror(errno));
    char *text = NULL; /* owned here */
    size_t n = 0;
    ssize_t got = getdelim(&text, &n, '\0', f);
    fclose(f);
    rs_status st = got < 0 ? rs_err_set(err, RS_ERR_ARG, "Hostfile is empty or not formatted correctly, unable to proceed "
                                        "with launching.")
                           : rs_hostfile_parse(text, out, err);
    free(text);
    if (st) rs_err_prefix(err, "hostfile %s", path);
    return st;
}

rs_status rs_hostfile_mpi_hosts(const rs_hostfile *h, int ranks, char *buf, size_t cap, rs_err *err)
{
    if (ranks > h->slots)
        return rs_err_set(err, RS_ERR_ARG, "%d ranks do not fit in the hostfile's %lld slots (add hosts or slots, or "
                          "fewer ranks)", ranks, h->slots);
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0, left = ranks; i < h->n && left > 0; i++) {
        int take = h->hosts[i].slots < left ? h->hosts[i].slots : left;
        if (take == 0) continue;
        int w = snprintf(buf + at, cap - at, "%s%s:%d", at ? "," : "", h->hosts[i].name, take);
        if (w < 0 || (size_t)w >= cap - at) return rs_err_set(err, RS_ERR_ARG, "hostfile: the host list is too long");
        at += (size_t)w;
        left -= take;
    }
    return RS_OK;
}

void rs_hostfile_clear(rs_hostfile *h)
{
    if (!h) return;
    free(h->hosts);
    *h = (rs_hostfile){0};
}
