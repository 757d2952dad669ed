/* What several kinds of runs on ranks keep from their ranks' machine lines (see ranks_job.h): each
 * rank's verdict (@check), the buffers it sent (@vals), its named numbers (@num). Each takes its line
 * whole, so a line a kind keeps never reaches the printed output. */
#include <stdlib.h>
#include <string.h>

#include "ranks_job.h"
#include "result.h"

bool rs_job_checks_init(rs_job_checks *k, int world)
{
    k->wrong = calloc((size_t)world, sizeof *k->wrong);
    k->seconds = calloc((size_t)world, sizeof *k->seconds);
    k->checked = calloc((size_t)world, sizeof *k->checked);
    return k->wrong && k->seconds && k->checked;
}

bool rs_job_checks_line(rs_job_checks *k, int world, const char *line)
{
    int r;
    uint64_t wrong;
    double secs;
    if (!rs_wire_parse_check(line, &r, &wrong, &secs)) return false;
    if (r < world && k->wrong) {
        k->wrong[r] = wrong;
        k->seconds[r] = secs;
        k->checked[r] = true;
    }
    return true;
}

void rs_job_checks_sum(const rs_job_checks *k, int world, uint64_t *wrong, double *slowest, int *missing)
{
    *wrong = 0;
    *slowest = 0;
    *missing = 0;
    for (int r = 0; r < world; r++) {
        *wrong += k->wrong[r];
        if (k->seconds[r] > *slowest) *slowest = k->seconds[r];
        if (!k->checked[r]) (*missing)++;
    }
}

void rs_job_checks_free(rs_job_checks *k)
{
    free(k->wrong);
    free(k->seconds);
    free(k->checked);
}

bool rs_job_vals_line(rs_job_vals *k, int world, const char *line)
{
    if (strncmp(line, "@vals ", 6)) return false;
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 8;
        rs_wire_vals *v = realloc(k->v, sizeof *v * (size_t)cap);
        if (!v) return true;
        k->v = v;
        k->cap = cap;
    }
    if (rs_wire_parse_vals(line, &k->v[k->n]) && k->v[k->n].rank < world) k->n++;
    return true;
}

void rs_job_vals_record(const rs_job_vals *k, rs_session *s)
{
    for (int i = 0; i < k->n; i++) rs_result_vec(s, k->v[i].which, k->v[i].rank, k->v[i].v, k->v[i].n);
}

void rs_job_vals_free(rs_job_vals *k) { free(k->v); }

bool rs_job_nums_line(rs_job_nums *k, int world, const char *line)
{
    rs_job_num n;
    if (!rs_wire_parse_num(line, &n.rank, n.name, &n.v)) return false;
    if (n.rank >= world) return true;
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 32;
        rs_job_num *v = realloc(k->v, sizeof *v * (size_t)cap);
        if (!v) return true;
        k->v = v;
        k->cap = cap;
    }
    k->v[k->n++] = n;
    return true;
}

void rs_job_nums_free(rs_job_nums *k) { free(k->v); }
