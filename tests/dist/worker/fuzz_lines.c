/* Fuzz target for the lines the REPL reads from its ranks (dist/worker/worker.h): any bytes, as a
 * line, must parse or be refused without a crash; whatever parses must survive a format round trip
 * (format, parse again, same record), so nothing a rank could print is read two ways. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/worker/worker.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line = malloc(size + 1);
    if (!line) return 0;
    memcpy(line, data, size);
    line[size] = 0;
    char buf[512];
    rs_pg_event ev, ev2;
    if (rs_wire_parse_event(line, &ev)) {
        rs_wire_format_event(buf, sizeof buf, &ev);
        if (!rs_wire_parse_event(buf, &ev2) || ev2.kind != ev.kind || ev2.op != ev.op || ev2.algo != ev.algo ||
            ev2.coll != ev.coll || ev2.step != ev.step || ev2.rank != ev.rank || ev2.peer != ev.peer ||
            ev2.bytes != ev.bytes || ev2.group != ev.group || ev2.chunk != ev.chunk)
            __builtin_trap();
    }
    rs_bench_row row, row2;
    if (rs_wire_parse_bench(line, &row)) {
        if (fabs(row.time_us) > 1e300 || fabs(row.algbw) > 1e300 || fabs(row.busbw) > 1e300) goto out;
        rs_wire_format_bench(buf, sizeof buf, &row);
        if (strlen(buf) < sizeof buf - 1 &&
            (!rs_wire_parse_bench(buf, &row2) || row2.op != row.op || row2.bytes != row.bytes ||
             row2.count != row.count || row2.dtype != row.dtype || row2.redop != row.redop ||
             row2.wrong != row.wrong || row2.iters != row.iters))
            __builtin_trap();
    }
    static rs_data_line dl, dl2;
    if (rs_wire_parse_data(line, &dl)) {
        char big[RS_WIRE_DATA_MAX * 28 + 200];
        rs_wire_format_data(big, sizeof big, &dl);
        /* values reprint exactly for integers and within the dtype's digits otherwise: compare the counts */
        if (!rs_wire_parse_data(big, &dl2) || dl2.rank != dl.rank || dl2.coll != dl.coll || dl2.done != dl.done ||
            dl2.steps != dl.steps || dl2.count != dl.count || dl2.blocks != dl.blocks || dl2.head != dl.head ||
            dl2.n != dl.n || dl2.dtype != dl.dtype || dl.n > RS_WIRE_DATA_MAX)
            __builtin_trap();
    }
    int r;
    uint64_t w;
    double s;
    if (rs_wire_parse_check(line, &r, &w, &s) && (r < 0 || !isfinite(s))) __builtin_trap();
    rs_train_line tl;
    if (rs_wire_parse_train(line, &tl)) {
        if (tl.rank < 0 || tl.step < 0) __builtin_trap();
        if (tl.kind == RS_TL_MICRO &&
            ((tl.work != 'F' && tl.work != 'B') || tl.micro < 0 || tl.stage < 0 || !isfinite(tl.t0) || !isfinite(tl.t1)))
            __builtin_trap();
        if (tl.kind == RS_TL_STAGE && (tl.stage < 0 || tl.stage >= tl.index || tl.first < 0 || tl.last < tl.first))
            __builtin_trap();
        if (tl.kind == RS_TL_METRIC && (!isfinite(tl.value) || !tl.name[0])) __builtin_trap();
    }
    static rs_wire_vals va, vb; /* 2 KiB each: off the stack */
    if (rs_wire_parse_vals(line, &va)) {
        static char vbuf[RS_WIRE_VALS_MAX * 26 + 64];
        if (va.n < 0 || va.n > RS_WIRE_VALS_MAX) __builtin_trap();
        int need = rs_wire_format_vals(vbuf, sizeof vbuf, &va);
        if (need < 0 || (size_t)need >= sizeof vbuf || !rs_wire_parse_vals(vbuf, &vb) || vb.rank != va.rank ||
            vb.n != va.n || strcmp(vb.which, va.which) || memcmp(vb.v, va.v, sizeof va.v[0] * (size_t)va.n))
            __builtin_trap();
    }
    int nr, nr2;
    char nn[32], nn2[32];
    double nv, nv2;
    if (rs_wire_parse_num(line, &nr, nn, &nv)) {
        rs_wire_format_num(buf, sizeof buf, nr, nn, nv);
        if (!rs_wire_parse_num(buf, &nr2, nn2, &nv2) || nr2 != nr || strcmp(nn, nn2) || nv2 != nv) __builtin_trap();
    }
    rs_p2p_times pa, pb;
    if (rs_wire_parse_p2p(line, &pa)) {
        rs_wire_format_p2p(buf, sizeof buf, &pa);
        if (!rs_wire_parse_p2p(buf, &pb) || pb.bytes != pa.bytes || pb.iters != pa.iters || !isfinite(pb.oneway))
            __builtin_trap();
    }
out:
    free(line);
    return 0;
}

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
#define S(x) {(const uint8_t *)(x), sizeof(x) - 1}
    static const rs_fuzz_seed s[] = {
        S("@ev s all_reduce ring 3 2 6 1 2 0 1000 0 8128.104819700"),
        S("@ev b barrier auto 0 0 0 1 -1 0 0 0 8128.1"),
        S("@ev e reduce tree 1 0 1 0 -1 0 8 2 1.5"),
        S("@bench all_reduce 1048576 262144 f32 sum 145.110 7.2300 7.2300 0 200"),
        S("@bench all_gather 1026 129 f64 max 3.5 0.1 0.06 3 1000"),
        S("@check 3 0 0.000024817"),
        S("@micro 1 3 F 2 1 8128.104819700 8128.105819700"),
        S("@micro 0 0 B 0 2 1.5 1.75"),
        S("@stage 1 1 2 4 7"),
        S("@metric 1 4 acts_peak_bytes 123456"),
        S("@phase 0 2 forward 1.5 1.75"),
        S("rank 0: in [1, 10] -> out [2, 110]"),
        S("@vals 0 out 2 2 110"),
        S("@vals 3 in 4 -1.5 1e-300 0.10000000000000001 3"),
        S("@vals 1 data 0"),
        S("@num 5 env.local_rank 1"),
        S("@num 0 group.size 6"),
        S("@p2p 262144 200 2.4e-06 2.8e-06 2e-05 6.1e-05 9.7e-05 9.4e-05"),
        S("@data 0 1 2 6 8 4 2 f32 13922.544417962 1 10 19 28 116 143 113 131"),
        S("@data 3 1 0 6 1001 4 8 i64 1.5 1 10 19 28 37 46 55 64 2251 2260 2269 2278 2287 2296 2305 2314 4501 4510 4519 "
          "4528 4537 4546 4555 4564 6751 6760 6769 6778 6787 6796 6805 6814"),
        /* an i64 value past what a long long holds (the guided fuzzer's find: it must print as a double) */
        S("@data 3 1 0 6 3 1 8 i64 1.5 1 674444444444444444444444444444444444487 -9.3e18"),
        S("@ev s all_reduce ring 18446744073709551615 2147483647 6 1 2 0 1000 0 1e308"),
    };
#undef S
    *seeds = s;
    return sizeof s / sizeof s[0];
}
