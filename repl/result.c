/* The last result's store (see result.h): a flat list of named values, small enough (tens of entries)
 * that a linear search is the simplest thing that works. */
#include "result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_results *store(rs_session *s)
{
    if (!s->results) s->results = calloc(1, sizeof *s->results); /* owned by the session */
    return s->results;
}

static void clear_vals(rs_results *r)
{
    for (int i = 0; i < r->n; i++) free(r->vals[i].v);
    r->n = 0;
}

void rs_results_free(rs_results *r)
{
    if (!r) return;
    clear_vals(r);
    free(r->vals);
    free(r);
}

void rs_result_begin(rs_session *s, const char *cmd)
{
    rs_results *r = store(s);
    if (!r) return;
    clear_vals(r);
    if (!cmd) cmd = s->cmd_text ? s->cmd_text : "";
    snprintf(r->cmd, sizeof r->cmd, "%s", cmd);
    r->main[0] = '\0';
    r->failed = r->nomem = false;
    r->gen++;
}

unsigned rs_result_gen(const rs_session *s) { return s->results ? s->results->gen : 0; }

void rs_result_fail(rs_session *s)
{
    if (s->results) s->results->failed = true;
}

void rs_result_main(rs_session *s, const char *name)
{
    if (s->results) snprintf(s->results->main, sizeof s->results->main, "%s", name);
}

const rs_result_val *rs_result_find(const rs_results *r, const char *name, int rank)
{
    for (int i = 0; r && i < r->n; i++)
        if (r->vals[i].rank == rank && !strcmp(r->vals[i].name, name)) return &r->vals[i];
    return NULL;
}

bool rs_result_has(const rs_results *r, const char *name, bool *per_rank)
{
    for (int i = 0; r && i < r->n; i++)
        if (!strcmp(r->vals[i].name, name)) {
            if (per_rank) *per_rank = r->vals[i].rank >= 0;
            return true;
        }
    return false;
}

void rs_result_vec(rs_session *s, const char *name, int rank, const double *v, int n)
{
    rs_results *r = s->results;
    if (!r || n < 0) return; /* no rs_result_begin (or it ran out of memory): nothing to add to */
    double *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
    if (!copy) {
        r->nomem = true;
        return;
    }
    if (n) memcpy(copy, v, (size_t)n * sizeof *copy);
    rs_result_val *slot = (rs_result_val *)rs_result_find(r, name, rank);
    if (!slot) {
        if (r->n == r->cap) {
            int cap = r->cap ? 2 * r->cap : 32;
            rs_result_val *nv = realloc(r->vals, (size_t)cap * sizeof *nv);
            if (!nv) {
                free(copy);
                r->nomem = true;
                return;
            }
            r->vals = nv;
            r->cap = cap;
        }
        slot = &r->vals[r->n++];
        snprintf(slot->name, sizeof slot->name, "%s", name);
        slot->rank = rank;
    } else {
        free(slot->v);
    }
    slot->v = copy;
    slot->n = n;
}

void rs_result_num(rs_session *s, const char *name, double v) { rs_result_vec(s, name, -1, &v, 1); }

void rs_result_rank(rs_session *s, const char *name, int rank, double v) { rs_result_vec(s, name, rank, &v, 1); }
