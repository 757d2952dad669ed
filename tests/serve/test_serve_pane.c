/* The dashboard's serve pane against a real server at the prompt: `serve m`, requests from `infer`
 * (32 from 8 clients, merged by the batcher; 4 from one client, each alone) and one bad request over
 * HTTP; then the pane's text must hold the figures the scheduler counted: requests ok and failed,
 * samples and batches, and a histogram whose rows are the sizes Triton's statistics document lists
 * (GET /v2/models/m/stats, written by http_json.c from its own snapshot) with their counts, bars
 * ordered as the counts. Also: `serve` prints the very lines the pane shows, `view serve` without a
 * terminal prints the frame, no server and a small terminal say so, and NO_COLOR / ASCII hold. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "raw_http.h"
#include "repl.h"
#include "repl/view/serve_pane.h"
#include "rs_test.h"
#include "serve/summary.h"

static char *draw(const rs_serve_summary *sum, int w, int h, const rs_view_opts *o)
{
    rs_view_screen *s = rs_view_screen_new(w, h, NULL);
    rs_view_draw_serve_frame(s, sum, o);
    char *t = strdup(rs_view_screen_text(s));
    rs_view_screen_free(s);
    return t;
}

/* The histogram rows of a frame: "  SIZE  ###... COUNT" after the "batch size" head. */
static int hist_rows(const char *text, int *size, uint64_t *count, int *bar, int max)
{
    const char *p = strstr(text, "batch size  batches run");
    int n = 0;
    if (!p) return 0;
    p = strchr(p, '\n');
    while (p && p[1] && n < max) {
        p++;
        if (!strncmp(p, "\xe2\x94\x82", 3)) p += 3; /* a framed block's edge */
        else if (*p == '|') p++;
        int sz, used = 0;
        if (sscanf(p, " %d %n", &sz, &used) != 1 || (p[used] != '#' && (unsigned char)p[used] != 0xe2)) break;
        const char *q = p + used;
        int len = 0;
        while (*q == '#' || (unsigned char)*q == 0xe2) q += *q == '#' ? 1 : 3, len++;
        unsigned long long c;
        if (sscanf(q, " %llu", &c) != 1) break;
        size[n] = sz, count[n] = c, bar[n] = len;
        n++;
        p = strchr(p, '\n');
    }
    return n;
}

static void check_frame(const rs_serve_summary *sum, const char *text, const char *what, json_t *bstats)
{
    RS_CHECK(strstr(text, "requests 36 ok / 1 failed, 36 samples in"), "%s: no ok/failed/samples line:\n%s", what, text);
    RS_CHECK(strstr(text, "requests/s (last 10 s)") && strstr(text, "latency p50") && strstr(text, "queue p50"),
             "%s: no rate/latency line:\n%s", what, text);
    RS_CHECK(strstr(text, "queued 0"), "%s: the queue is empty now:\n%s", what, text);
    int size[64], bar[64];
    uint64_t count[64];
    int n = hist_rows(text, size, count, bar, 64);
    /* every size the server's statistics document lists, with its count, and nothing else */
    RS_CHECK(n == (int)json_array_size(bstats), "%s: %d histogram rows, the stats list %zu sizes:\n%s", what, n,
             json_array_size(bstats), text);
    uint64_t samples = 0, batches = 0;
    for (int i = 0; i < n && i < (int)json_array_size(bstats); i++) {
        json_t *b = json_array_get(bstats, (size_t)i);
        long long bs = json_integer_value(json_object_get(b, "batch_size"));
        long long bc = json_integer_value(json_object_get(json_object_get(b, "compute_infer"), "count"));
        RS_CHECK(size[i] == bs && (long long)count[i] == bc, "%s: row %d is %d x %llu, the stats say %lld x %lld", what,
                 i, size[i], (unsigned long long)count[i], bs, bc);
        samples += (uint64_t)size[i] * count[i], batches += count[i];
        for (int k = 0; k < n; k++)
            RS_CHECK(count[k] <= count[i] || bar[k] >= bar[i], "%s: bar %d (%llu) shorter than bar %d (%llu)", what,
                     k, (unsigned long long)count[k], i, (unsigned long long)count[i]);
    }
    RS_CHECK(samples == 36 && batches == sum->rows[0].batches,
             "%s: the histogram holds %llu samples in %llu batches; 36 in %llu ran", what, (unsigned long long)samples,
             (unsigned long long)batches, (unsigned long long)sum->rows[0].batches);
}

int main(void)
{
    FILE *out = tmpfile();
    rs_session *s = rs_session_new(out);
    s->err = out;
    rs_view_opts color = rs_view_opts_detect("xterm-256color", NULL, true);
    rs_view_opts mono = rs_view_opts_detect("xterm-256color", "1", true);
    rs_view_opts dumb = rs_view_opts_detect("dumb", NULL, true);

    /* no server: the pane and the command say how to start one */
    char *t = draw(NULL, 80, 24, &color);
    RS_CHECK(strstr(t, "nothing is served") && strstr(t, "serve MODEL"), "no server:\n%s", t);
    free(t);
    RS_CHECK(rs_repl_line(s, "view serve") == 1, "view serve without a server succeeded");

    RS_CHECK(rs_repl_line(s, "set threads=1; model m = mlp 5-7-3 seed=2; serve m http=0 grpc=-1 metrics=-1 "
                             "max_batch=8 delay=50ms") == 0 && s->server, "serve m");
    if (!s->server) return rs_test_finish("serve-pane");
    rs_serve_summary sum;
    rs_err e = {0};
    RS_CHECK(rs_serve_summary_take(s->server, rs_serve_now_ns(), &sum, &e) == RS_OK && sum.n == 1 &&
                 sum.rows[0].ok == 0 && sum.rows[0].batches == 0, "summary before any request: %s", e.msg);
    t = draw(&sum, 80, 24, &color);
    RS_CHECK(strstr(t, "requests 0 ok / 0 failed") && !strstr(t, "batch size"), "idle server:\n%s", t);
    free(t);
    rs_serve_summary_clear(&sum);

    RS_CHECK(rs_repl_line(s, "infer m n=32 clients=8") == 0, "infer 32 from 8 clients");
    RS_CHECK(rs_repl_line(s, "infer m n=4 clients=1") == 0, "infer 4 from 1 client");
    const char *bad = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[1,2,3,4]}]}";
    char head[256];
    snprintf(head, sizeof head, "POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: %zu", strlen(bad));
    resp r;
    int port = rs_serve_http_port(s->server);
    http(port, head, bad, strlen(bad), &r);
    RS_CHECK(r.status == 400, "a wrong shape answered %d", r.status);
    free(r.raw);
    http(port, "GET /v2/models/m/stats HTTP/1.1", NULL, 0, &r);
    json_t *j = json_loadb(r.body, r.body_n, 0, NULL);
    json_t *ms = json_array_get(json_object_get(j, "model_stats"), 0);
    json_t *bstats = json_object_get(ms, "batch_stats");
    RS_CHECK(r.status == 200 && json_array_size(bstats) >= 2, "stats: %d %.*s", r.status, (int)r.body_n, r.body);
    free(r.raw);

    RS_CHECK(rs_serve_summary_take(s->server, rs_serve_now_ns(), &sum, &e) == RS_OK && sum.n == 1, "summary");
    const rs_serve_summary_row *row = &sum.rows[0];
    RS_CHECK(row->ok == 36 && row->failed == 1 && row->samples == 36 && row->queued == 0 &&
                 row->batches == (uint64_t)json_integer_value(json_object_get(ms, "execution_count")),
             "summary: %llu ok, %llu failed, %llu samples, %llu batches", (unsigned long long)row->ok,
             (unsigned long long)row->failed, (unsigned long long)row->samples, (unsigned long long)row->batches);
    /* merged: the 32 concurrent ones ran in fewer batches; the lone client's 4 ran alone */
    RS_CHECK(row->batches < 36 && row->max_batch == 8 && row->batch_count[1] >= 4, "batching: %llu batches, %llu of 1",
             (unsigned long long)row->batches, (unsigned long long)row->batch_count[1]);
    RS_CHECK(row->p50_us > 0 && row->p99_us >= row->p50_us && row->rate > 0, "p50 %g p99 %g rate %g", row->p50_us,
             row->p99_us, row->rate);

    char *small = draw(&sum, 80, 24, &color), *big = draw(&sum, 160, 48, &color);
    check_frame(&sum, small, "80x24", bstats);
    check_frame(&sum, big, "160x48", bstats);
    RS_CHECK(strstr(big, "\xe2\x94\x8c") && strstr(big, "m v1"), "160x48: the version's block is framed:\n%s", big);
    char *m = draw(&sum, 80, 24, &mono), *a = draw(&sum, 80, 24, &dumb);
    RS_CHECK(!strcmp(m, small), "NO_COLOR changed the text");
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        if (*p >= 0x80) {
            RS_CHECK(0, "ASCII mode wrote byte 0x%02x", *p);
            break;
        }
    check_frame(&sum, a, "80x24 ascii", bstats);
    rs_view_screen *sc = rs_view_screen_new(80, 24, NULL);
    rs_view_draw_serve_frame(sc, &sum, &mono);
    int colored = 0;
    for (int y = 0; y < 24; y++)
        for (int x = 0; x < 80; x++) colored += rs_view_screen_at(sc, x, y)->color != 0;
    RS_CHECK(colored == 0, "NO_COLOR drew %d coloured cells", colored);
    rs_view_draw_serve_frame(sc, &sum, &color);
    for (int y = 0; y < 24; y++)
        for (int x = 0; x < 80; x++) colored += rs_view_screen_at(sc, x, y)->color != 0;
    RS_CHECK(colored > 0, "colour mode drew no colour");
    rs_view_screen_free(sc);
    free(m);
    free(a);
    t = draw(&sum, 79, 24, &color);
    RS_CHECK(strstr(t, "terminal too small: need 80x24") && !strstr(t, "requests"), "79x24:\n%s", t);
    free(t);

    /* the pane shows `serve`'s text (its batch sizes as the histogram): at 160 columns, line by line */
    int n = rs_serve_summary_text(row, false, NULL, 0);
    char *txt = malloc((size_t)n + 1);
    rs_serve_summary_text(row, false, txt, (size_t)n + 1);
    int lines = 0;
    for (char *l = txt, *nl; (nl = strchr(l, '\n')); l = nl + 1, lines++) {
        *nl = '\0';
        RS_CHECK(strstr(big, l) != NULL, "the 160-column frame lacks serve's line '%s':\n%s", l, big);
    }
    RS_CHECK(lines == 2 && !strstr(big, "batches: "), "%d lines of serve's text, batches line in the pane", lines);
    free(txt);
    free(small);
    free(big);
    json_decref(j);
    rs_serve_summary_clear(&sum);

    /* headless `view serve` prints a frame, `serve` the same figures */
    fflush(out);
    long at = ftell(out);
    RS_CHECK(rs_repl_line(s, "view serve") == 0 && rs_repl_line(s, "serve") == 0, "view serve; serve");
    fflush(out);
    fseek(out, at, SEEK_SET);
    char text[16384] = {0};
    size_t got = fread(text, 1, sizeof text - 1, out);
    text[got] = 0;
    RS_CHECK(strstr(text, "serve") && strstr(text, "batch size  batches run (36 samples in") &&
                 strstr(text, "36 ok / 1 failed") && strstr(text, "      batches: "), "view serve; serve printed:\n%s",
             text);
    RS_CHECK(rs_repl_line(s, "view serve 2") == 1 && rs_repl_line(s, "view nothing") == 1, "bad view forms accepted");
    RS_CHECK(rs_repl_line(s, "serve stop") == 0 && rs_repl_line(s, "view serve") == 1, "view serve after stop");
    rs_session_free(s);
    fclose(out);
    return rs_test_finish("serve-pane");
}
