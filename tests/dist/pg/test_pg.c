/* The process-group front end without a real backend: the serial reductions every backend is
 * checked against, the argument checks and their messages, and the begin/end trace events, through
 * a fake backend that records what reached it. */
#include <stdlib.h>
#include <string.h>

#include "dist/pg/pg.h"
#include "tests/rs_test.h"

static int calls;

static rs_status fake_all_reduce(rs_pg *g, void *buf, size_t n, rs_dtype t, rs_redop op, rs_err *err)
{
    (void)g, (void)buf, (void)n, (void)t, (void)op, (void)err;
    calls++;
    return RS_OK;
}

static rs_status fake_barrier(rs_pg *g, rs_err *err)
{
    (void)g, (void)err;
    calls++;
    return RS_OK;
}

static const rs_pg_ops fake_ops = {.name = "fake", .all_reduce = fake_all_reduce, .barrier = fake_barrier};

typedef struct seen {
    int begins, ends;
    uint64_t last_coll;
    size_t bytes;
} seen;

static void on_ev(void *ud, const rs_pg_event *ev)
{
    seen *s = ud;
    if (ev->kind == RS_PG_EV_BEGIN) s->begins++;
    if (ev->kind == RS_PG_EV_END) {
        s->ends++;
        s->last_coll = ev->coll;
        s->bytes = ev->bytes;
    }
}

static void test_reduce(void)
{
    float a[3] = {1, -2, 3}, b[3] = {4, 5, -6};
    rs_pg_reduce_into(a, b, 3, RS_F32, RS_SUM);
    RS_CHECK(a[0] == 5 && a[1] == 3 && a[2] == -3, "f32 sum %g %g %g", a[0], a[1], a[2]);
    double c[2] = {2, 10}, d[2] = {3, 11};
    rs_pg_reduce_into(c, d, 2, RS_F64, RS_PRODUCT);
    RS_CHECK(c[0] == 6 && c[1] == 110, "f64 product %g %g", c[0], c[1]);
    int32_t e[3] = {5, -7, 0}, f[3] = {-1, 9, 0};
    rs_pg_reduce_into(e, f, 3, RS_I32, RS_MIN);
    RS_CHECK(e[0] == -1 && e[1] == -7 && e[2] == 0, "i32 min");
    int64_t g[2] = {INT64_MAX, -3}, h[2] = {1, 8};
    rs_pg_reduce_into(g, h, 2, RS_I64, RS_MAX);
    RS_CHECK(g[0] == INT64_MAX && g[1] == 8, "i64 max");
    /* Integer sums wrap like torch's, without undefined behaviour. */
    int32_t w[1] = {INT32_MAX}, one[1] = {1};
    rs_pg_reduce_into(w, one, 1, RS_I32, RS_SUM);
    RS_CHECK(w[0] == INT32_MIN, "i32 sum wraps: %d", w[0]);
    /* AVG reduces as a sum; the division happens once. */
    float s[2] = {1, 2}, t[2] = {2, 5};
    rs_pg_reduce_into(s, t, 2, RS_F32, RS_AVG);
    rs_pg_scale_avg(s, 2, RS_F32, 2);
    RS_CHECK(s[0] == 1.5f && s[1] == 3.5f, "f32 avg %g %g", s[0], s[1]);
    int64_t q[2] = {7, -7};
    rs_pg_scale_avg(q, 2, RS_I64, 2);
    RS_CHECK(q[0] == 3 && q[1] == -3, "i64 avg truncates toward zero: %lld %lld", (long long)q[0], (long long)q[1]);
    RS_CHECK(!strcmp(rs_redop_name(RS_PRODUCT), "product") && !strcmp(rs_pg_op_name(RS_OP_ALL_REDUCE), "all_reduce"),
             "names");
}

static void test_checks(void)
{
    rs_pg g = {.ops = &fake_ops, .rank = 1, .world = 4, .timeout_s = 1};
    seen sn = {0};
    g.trace = on_ev;
    g.trace_ud = &sn;
    rs_err err = {0};
    float buf[5] = {0};
    calls = 0;
    RS_CHECK(rs_pg_all_reduce(&g, buf, 5, RS_F32, RS_SUM, &err) == RS_OK, "%s", err.msg);
    RS_CHECK(calls == 1 && sn.begins == 1 && sn.ends == 1 && sn.bytes == 20 && sn.last_coll == 0 && g.coll == 1,
             "one all_reduce: calls %d begins %d ends %d bytes %zu coll %llu", calls, sn.begins, sn.ends, sn.bytes,
             (unsigned long long)g.coll);
    RS_CHECK(rs_pg_barrier(&g, &err) == RS_OK && g.coll == 2 && sn.last_coll == 1, "barrier counts as collective 1");
    RS_CHECK(rs_pg_all_reduce(&g, buf, 5, RS_F16, RS_SUM, &err) == RS_ERR_UNSUPPORTED && strstr(err.msg, "f16") &&
                 strstr(err.msg, "f32, f64, i32 or i64"),
             "f16 refused: %s", err.msg);
    RS_CHECK(rs_pg_broadcast(&g, buf, 5, RS_F32, 0, &err) == RS_ERR_UNSUPPORTED && strstr(err.msg, "broadcast") &&
                 strstr(err.msg, "fake"),
             "missing op named: %s", err.msg);
    g.ops = &(rs_pg_ops){.name = "fake2", .reduce = (void *)fake_all_reduce, .send = (void *)fake_barrier};
    RS_CHECK(rs_pg_reduce(&g, buf, 5, RS_F32, RS_SUM, 4, &err) == RS_ERR_ARG && strstr(err.msg, "root 4") &&
                 strstr(err.msg, "0..3"),
             "root out of range: %s", err.msg);
    RS_CHECK(rs_pg_send(&g, buf, 5, RS_F32, 1, &err) == RS_ERR_ARG && strstr(err.msg, "cannot send to itself"),
             "send to self: %s", err.msg);
    RS_CHECK(rs_pg_send(&g, buf, 5, RS_F32, -1, &err) == RS_ERR_ARG && strstr(err.msg, "destination -1"),
             "negative destination: %s", err.msg);
    RS_CHECK(rs_pg_all_reduce(NULL, buf, 5, RS_F32, RS_SUM, &err) == RS_ERR_ARG, "no group");
}

int main(void)
{
    test_reduce();
    test_checks();
    return rs_test_finish("pg");
}
