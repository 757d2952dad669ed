/* The machine lines between a worker and the REPL (see worker.h), and the names both sides use.
 * Text, one record per line, so they travel through the launcher's line capture and through mpirun's
 * output forwarding alike, and a person reading a worker's raw output can follow them. */
#include "worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The words are dist/pg's own (pg.h), so a worker reads what the prompt offers. */
bool rs_pg_op_from_name(const char *s, rs_pg_opkind *out)
{
    for (int k = 0; k < RS_OP_KIND_COUNT; k++)
        if (!strcmp(s, rs_pg_op_names[k])) {
            *out = (rs_pg_opkind)k;
            return true;
        }
    return false;
}

bool rs_redop_from_name(const char *s, rs_redop *out)
{
    for (int k = 0; k < RS_REDOP_COUNT; k++)
        if (!strcmp(s, rs_redop_names[k])) {
            *out = (rs_redop)k;
            return true;
        }
    return false;
}

bool rs_pg_algo_from_name(const char *s, rs_pg_algo *out)
{
    for (int k = 0; k < RS_ALGO_COUNT; k++)
        if (!strcmp(s, rs_pg_algo_names[k])) {
            *out = (rs_pg_algo)k;
            return true;
        }
    return false;
}

double rs_pg_bus_factor(rs_pg_opkind op, int world)
{
    if (world < 1) return 1;
    double n = world;
    switch (op) {
    case RS_OP_ALL_REDUCE: return 2 * (n - 1) / n;
    case RS_OP_ALL_GATHER:
    case RS_OP_REDUCE_SCATTER:
    case RS_OP_ALL_TO_ALL: return (n - 1) / n;
    default: return 1;
    }
}

int rs_wire_format_event(char *buf, size_t cap, const rs_pg_event *ev)
{
    static const char kinds[] = {'b', 's', 'e'};
    return snprintf(buf, cap, "@ev %c %s %s %llu %d %d %d %d %d %zu %d %.9f", kinds[ev->kind % 3],
                    rs_pg_op_name(ev->op), rs_pg_algo_name(ev->algo), (unsigned long long)ev->coll, ev->step,
                    ev->steps, ev->rank, ev->peer, ev->chunk, ev->bytes, ev->group, ev->t);
}

bool rs_wire_parse_event(const char *line, rs_pg_event *ev)
{
    char kind, op[24], algo[24];
    unsigned long long coll;
    int step, steps, rank, peer, chunk, group, used = 0;
    unsigned long long bytes;
    double t;
    if (strncmp(line, "@ev ", 4) != 0) return false;
    if (sscanf(line, "@ev %c %23s %23s %llu %d %d %d %d %d %llu %d %lf%n", &kind, op, algo, &coll, &step, &steps,
               &rank, &peer, &chunk, &bytes, &group, &t, &used) != 12 ||
        line[used] != 0)
        return false;
    rs_pg_event e = {0};
    if (kind == 'b') e.kind = RS_PG_EV_BEGIN;
    else if (kind == 's') e.kind = RS_PG_EV_STEP;
    else if (kind == 'e') e.kind = RS_PG_EV_END;
    else return false;
    if (!rs_pg_op_from_name(op, &e.op) || !rs_pg_algo_from_name(algo, &e.algo) || !isfinite(t) || rank < 0 ||
        peer < -1 || step < 0 || steps < 0 || group < 0)
        return false;
    e.coll = coll;
    e.step = step;
    e.steps = steps;
    e.rank = rank;
    e.peer = peer;
    e.chunk = chunk;
    e.bytes = (size_t)bytes;
    e.group = group;
    e.t = t;
    *ev = e;
    return true;
}

static bool finite_all(const double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

static bool which_ok(const char *w)
{
    if (!*w) return false;
    for (; *w; w++)
        if (!((*w >= 'a' && *w <= 'z') || *w == '_')) return false;
    return true;
}

int rs_wire_format_vals(char *buf, size_t cap, const rs_wire_vals *v)
{
    size_t k = (size_t)snprintf(buf, cap, "@vals %d %s %d", v->rank, v->which, v->n);
    for (int i = 0; i < v->n; i++) k += (size_t)snprintf(buf + (k < cap ? k : cap), k < cap ? cap - k : 0, " %.17g", v->v[i]);
    return (int)k;
}

bool rs_wire_parse_vals(const char *line, rs_wire_vals *out)
{
    int used = 0;
    if (strncmp(line, "@vals ", 6) != 0) return false;
    if (sscanf(line, "@vals %d %15s %d%n", &out->rank, out->which, &out->n, &used) != 3 || out->rank < 0 ||
        out->n < 0 || out->n > RS_WIRE_VALS_MAX || !which_ok(out->which))
        return false;
    const char *p = line + used;
    for (int i = 0; i < out->n; i++) {
        int u = 0;
        if (*p != ' ' || sscanf(p, " %lf%n", &out->v[i], &u) != 1 || !isfinite(out->v[i])) return false;
        p += u;
    }
    return *p == 0;
}

int rs_wire_format_num(char *buf, size_t cap, int rank, const char *name, double v)
{
    return snprintf(buf, cap, "@num %d %s %.17g", rank, name, v);
}

bool rs_wire_parse_num(const char *line, int *rank, char name[32], double *v)
{
    int used = 0;
    if (strncmp(line, "@num ", 5) != 0) return false;
    if (sscanf(line, "@num %d %31s %lf%n", rank, name, v, &used) != 3 || line[used] != 0 || *rank < 0 || !isfinite(*v))
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')) return false;
    return true;
}

int rs_wire_format_p2p(char *buf, size_t cap, const rs_p2p_times *t)
{
    return snprintf(buf, cap, "@p2p %llu %d %.9g %.9g %.9g %.9g %.9g %.9g", (unsigned long long)t->bytes, t->iters,
                    t->oneway, t->exchange, t->compute, t->blocking, t->isend, t->isend_test);
}

bool rs_wire_parse_p2p(const char *line, rs_p2p_times *out)
{
    unsigned long long bytes;
    double v[6];
    int iters, used = 0;
    if (strncmp(line, "@p2p ", 5) != 0) return false;
    if (sscanf(line, "@p2p %llu %d %lf %lf %lf %lf %lf %lf%n", &bytes, &iters, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &used) != 8 ||
        line[used] != 0 || iters < 0 || !finite_all(v, 6))
        return false;
    *out = (rs_p2p_times){.bytes = bytes, .iters = iters, .oneway = v[0], .exchange = v[1], .compute = v[2],
                          .blocking = v[3], .isend = v[4], .isend_test = v[5]};
    return true;
}

static double elem(const void *b, uint64_t i, rs_dtype t)
{
    switch (t) {
    case RS_F32: return ((const float *)b)[i];
    case RS_F64: return ((const double *)b)[i];
    case RS_I32: return ((const int32_t *)b)[i];
    default: return (double)((const int64_t *)b)[i];
    }
}

void rs_wire_data_from(rs_data_line *d, const void *buf, uint64_t count, rs_dtype t, int blocks)
{
    if (blocks < 1) blocks = 1;
    if (blocks > RS_WIRE_DATA_MAX) blocks = RS_WIRE_DATA_MAX;
    d->count = buf ? count : 0;
    d->dtype = t;
    d->blocks = blocks;
    uint64_t longest = 0;
    for (int b = 0; b < blocks; b++)
        if (rs_wire_chunk_len(d->count, blocks, b) > longest) longest = rs_wire_chunk_len(d->count, blocks, b);
    int head = RS_WIRE_DATA_MAX / blocks;
    if (d->count <= RS_WIRE_DATA_MAX) head = (int)longest;
    else if (head > 8) head = 8;
    d->head = head > 0 ? head : 1;
    d->n = 0;
    for (int b = 0; b < blocks; b++) {
        uint64_t off = rs_wire_chunk_off(d->count, blocks, b);
        for (int i = 0; i < rs_wire_chunk_listed(d, b) && d->n < RS_WIRE_DATA_MAX; i++)
            d->v[d->n++] = elem(buf, off + (uint64_t)i, t);
    }
}

int rs_wire_format_data(char *buf, size_t cap, const rs_data_line *d)
{
    bool isint = d->dtype == RS_I32 || d->dtype == RS_I64;
    int n = snprintf(buf, cap, "@data %d %llu %d %d %llu %d %d %s %.9f", d->rank, (unsigned long long)d->coll, d->done,
                     d->steps, (unsigned long long)d->count, d->blocks, d->head, rs_dtype_name(d->dtype), d->t);
    /* enough digits to read back the same value: 9 for f32, 17 for f64; integers whole (a double past
     * what a long long holds, which only a line from elsewhere can carry, is printed as a double) */
    for (int i = 0; i < d->n && n >= 0 && (size_t)n < cap; i++) {
        double v = d->v[i];
        bool whole = isint && v > -9.2e18 && v < 9.2e18;
        n += whole ? snprintf(buf + n, cap - (size_t)n, " %lld", (long long)v)
                   : snprintf(buf + n, cap - (size_t)n, d->dtype == RS_F32 ? " %.9g" : " %.17g", v);
    }
    return n;
}

bool rs_wire_parse_data(const char *line, rs_data_line *out)
{
    rs_data_line d = {0};
    unsigned long long coll, count;
    char dt[8];
    int used = 0;
    if (strncmp(line, "@data ", 6) != 0) return false;
    if (sscanf(line, "@data %d %llu %d %d %llu %d %d %7s %lf%n", &d.rank, &coll, &d.done, &d.steps, &count, &d.blocks,
               &d.head, dt, &d.t, &used) != 9)
        return false;
    if (d.rank < 0 || d.done < 0 || d.steps < 0 || d.done > d.steps || d.blocks < 1 || d.blocks > RS_WIRE_DATA_MAX ||
        d.head < 1 || !isfinite(d.t) || !rs_dtype_from_name(dt, &d.dtype) || !rs_pg_dtype_ok(d.dtype))
        return false;
    d.coll = coll;
    d.count = count;
    int want = 0;
    for (int b = 0; b < d.blocks; b++) {
        want += rs_wire_chunk_listed(&d, b);
        if (want > RS_WIRE_DATA_MAX) return false;
    }
    const char *p = line + used;
    for (; d.n < want; d.n++) {
        int k = 0;
        if (sscanf(p, " %lf%n", &d.v[d.n], &k) != 1) return false;
        p += k;
    }
    if (*p) return false;
    *out = d;
    return true;
}

int rs_wire_format_bench(char *buf, size_t cap, const rs_bench_row *r)
{
    return snprintf(buf, cap, "@bench %s %llu %llu %s %s %.3f %.4f %.4f %llu %d", rs_pg_op_name(r->op),
                    (unsigned long long)r->bytes, (unsigned long long)r->count, rs_dtype_name(r->dtype),
                    rs_redop_name(r->redop), r->time_us, r->algbw, r->busbw, (unsigned long long)r->wrong, r->iters);
}

bool rs_wire_parse_bench(const char *line, rs_bench_row *row)
{
    char op[24], dt[8], red[12];
    unsigned long long bytes, count, wrong;
    double us, alg, bus;
    int iters, used = 0;
    if (strncmp(line, "@bench ", 7) != 0) return false;
    if (sscanf(line, "@bench %23s %llu %llu %7s %11s %lf %lf %lf %llu %d%n", op, &bytes, &count, dt, red, &us, &alg,
               &bus, &wrong, &iters, &used) != 10 ||
        line[used] != 0)
        return false;
    rs_bench_row r = {0};
    if (!rs_pg_op_from_name(op, &r.op) || !rs_dtype_from_name(dt, &r.dtype) || !rs_redop_from_name(red, &r.redop) ||
        !isfinite(us) || !isfinite(alg) || !isfinite(bus) || iters < 0)
        return false;
    r.bytes = bytes;
    r.count = count;
    r.time_us = us;
    r.algbw = alg;
    r.busbw = bus;
    r.wrong = wrong;
    r.iters = iters;
    *row = r;
    return true;
}

bool rs_wire_parse_check(const char *line, int *rank, uint64_t *wrong, double *seconds)
{
    unsigned long long w;
    int r, used = 0;
    double s;
    if (strncmp(line, "@check ", 7) != 0) return false;
    if (sscanf(line, "@check %d %llu %lf%n", &r, &w, &s, &used) != 3 || line[used] != 0 || r < 0 || !isfinite(s))
        return false;
    *rank = r;
    *wrong = w;
    *seconds = s;
    return true;
}


/* Exactly 2 * RS_POOL_COUNT non-negative integers, then the end of the line. */
static bool mem_values(const char *p, long long *a)
{
    for (int i = 0; i < 2 * RS_POOL_COUNT; i++) {
        int used = 0;
        if (sscanf(p, " %lld%n", &a[i], &used) != 1 || a[i] < 0) return false;
        p += used;
    }
    return *p == 0;
}

bool rs_wire_parse_train(const char *line, rs_train_line *out)
{
    rs_train_line t = {0};
    long long step = 0, a[2 * RS_POOL_COUNT];
    unsigned long long bytes = 0;
    int used = 0;
    double v[3];
    if (line[0] != '@') return false;
    if (sscanf(line, "@phase %d %lld %23s %lf %lf%n", &t.rank, &step, t.name, &v[0], &v[1], &used) == 5 && !line[used]) {
        t.kind = RS_TL_PHASE;
        t.t0 = v[0], t.t1 = v[1];
        if (!finite_all(v, 2)) return false;
    } else if (sscanf(line, "@comm %d %lld %23s %d %llu %lf %lf%n", &t.rank, &step, t.name, &t.index, &bytes, &v[0],
                      &v[1], &used) == 7 && !line[used]) {
        t.kind = RS_TL_COMM;
        t.bytes = bytes;
        t.t0 = v[0], t.t1 = v[1];
        if (!finite_all(v, 2)) return false;
    } else if (sscanf(line, "@step %d %lld %d %lf %lf %lf%n", &t.rank, &step, &t.epoch, &v[0], &v[1], &v[2], &used) ==
                   6 && !line[used]) {
        t.kind = RS_TL_STEP;
        t.loss = v[0], t.lr = v[1], t.sps = v[2];
        if (!finite_all(v + 1, 2)) return false; /* a NaN loss is reported, not refused */
    } else if (sscanf(line, "@mem %d %lld%n", &t.rank, &step, &used) == 2 && mem_values(line + used, a)) {
        t.kind = RS_TL_MEM;
        for (int i = 0; i < RS_POOL_COUNT; i++) t.live[i] = a[i], t.peak[i] = a[RS_POOL_COUNT + i];
    } else if (sscanf(line, "@eval %d %d %lf %lf%n", &t.rank, &t.epoch, &v[0], &v[1], &used) == 4 && !line[used]) {
        t.kind = RS_TL_EVAL;
        t.acc = v[0], t.loss = v[1];
    } else if (sscanf(line, "@done %d %lld %lf %lf%n", &t.rank, &step, &v[0], &v[1], &used) == 4 && !line[used]) {
        t.kind = RS_TL_DONE;
        t.seconds = v[0], t.sps = v[1];
        if (!finite_all(v, 2)) return false;
    } else if (sscanf(line, "@ckpt %d %lld%n", &t.rank, &step, &used) == 2 && !line[used]) {
        t.kind = RS_TL_CKPT;
    } else if (sscanf(line, "@micro %d %lld %c %d %d %lf %lf%n", &t.rank, &step, &t.work, &t.micro, &t.stage, &v[0],
                      &v[1], &used) == 7 && !line[used]) {
        t.kind = RS_TL_MICRO;
        t.t0 = v[0], t.t1 = v[1];
        if ((t.work != 'F' && t.work != 'B') || t.micro < 0 || t.stage < 0 || !finite_all(v, 2)) return false;
    } else if (sscanf(line, "@stage %d %d %d %d %d%n", &t.rank, &t.stage, &t.index, &t.first, &t.last, &used) == 5 &&
               !line[used]) {
        t.kind = RS_TL_STAGE;
        if (t.stage < 0 || t.index <= t.stage || t.first < 0 || t.last < t.first) return false;
    } else if (sscanf(line, "@metric %d %lld %23s %lf%n", &t.rank, &step, t.name, &t.value, &used) == 4 && !line[used]) {
        t.kind = RS_TL_METRIC;
        if (!isfinite(t.value)) return false;
    } else {
        return false;
    }
    if (t.rank < 0 || step < 0) return false;
    t.step = step;
    *out = t;
    return true;
}
