/* `serve` at the prompt: a session model is written into a repository and served in the background
 * while commands go on; its answers over HTTP equal the session model's own; `serve stop` ends it. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "plan/plan.h"
#include "raw_http.h"
#include "repl.h"
#include "rs_test.h"
#include "serve/server.h"

/* POSTs body to path on port; the reply's first output's data (the caller's, json_decref(*doc)) and status. */
static json_t *post_outputs(int port, const char *path, const char *body, json_t **doc, int *status)
{
    char head[256];
    snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nContent-Length: %zu", path, strlen(body));
    resp r;
    http(port, head, body, strlen(body), &r);
    *status = r.status;
    *doc = json_loadb(r.body, r.body_n, 0, NULL);
    if (r.status != 200) fprintf(stderr, "  %s: %d %s\n", path, r.status, r.body);
    free(r.raw);
    return json_object_get(json_array_get(json_object_get(*doc, "outputs"), 0), "data");
}

/* `serve m` of an MLP: the answer equals the session model; a second serve, `serve`, `serve stop`, a
 * bad source and numbers past what the server takes. */
static void check_mlp(rs_session *s, const char *repo)
{
    char line[512];
    snprintf(line, sizeof line, "model m = mlp 5-7-3 seed=2; serve m http=0 grpc=0 metrics=-1 repo=%s/r max_batch=8", repo);
    RS_CHECK(rs_repl_line(s, line) == 0, "serve failed");
    RS_CHECK(s->server != NULL, "no server");
    if (!s->server) return;
    int port = rs_serve_http_port(s->server);
    /* The session model runs the same input here. */
    float x[10] = {0.5f, -1, 2, 0.25f, 3, -0.5f, 1, 1, -2, 0};
    const float *want;
    rs_err e = {0};
    rs_model_forward(rs_session_find(s, "m")->model, x, 2, &want, &e);
    json_t *j;
    int status;
    json_t *d = post_outputs(port, "/v2/models/m/infer", "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\","
                             "\"shape\":[2,5],\"data\":[0.5,-1,2,0.25,3,-0.5,1,1,-2,0]}]}", &j, &status);
    RS_CHECK(status == 200 && json_array_size(d) == 6, "infer %d", status);
    for (size_t i = 0; i < json_array_size(d); i++)
        RS_CHECK_CLOSE(json_number_value(json_array_get(d, i)), want[i], 1e-5, 1e-4, "output");
    json_decref(j);
    resp r;
    http(port, "GET /v2/models/m/config HTTP/1.1", NULL, 0, &r);
    RS_CHECK(r.status == 200 && strstr(r.body, "\"max_batch_size\":8"), "%s", r.body);
    free(r.raw);
    /* A second serve while one runs is refused; serve alone lists the counters. */
    RS_CHECK(rs_repl_line(s, "serve m http=0") == 1, "second serve accepted");
    RS_CHECK(rs_repl_line(s, "serve") == 0, "serve (show)");
    RS_CHECK(rs_repl_line(s, "serve stop") == 0 && s->server == NULL, "serve stop");
    RS_CHECK(http(port, "GET /v2/health/live HTTP/1.1", NULL, 0, &r) == -1 || r.status == 0, "still listening");
    free(r.raw);
    RS_CHECK(rs_repl_line(s, "serve /no/such/thing") == 1, "bad source accepted");
    /* numbers past what the server takes are refused before they are narrowed (4294967297 read as an
     * int is 1; 1e300 s in microseconds is past an int64) */
    RS_CHECK(rs_repl_line(s, "serve m http=0 metrics=-1 max_batch=4294967297") == 1 && !s->server,
             "max_batch=2^32+1 accepted");
    rs_serve_stop(s->server);
    s->server = NULL;
    RS_CHECK(rs_repl_line(s, "serve m http=0 metrics=-1 delay=1e300s") == 1 && !s->server, "delay=1e300s accepted");
    rs_serve_stop(s->server);
    s->server = NULL;
}

/* A GPT at the prompt: written as weights + vocabulary, served decoupled; HTTP generate gives what
 * `generate` printed for the same seed. */
static void check_gpt(rs_session *s, FILE *out, const char *repo)
{
    char line[512];
    snprintf(line, sizeof line, "%s/abc.txt", repo);
    FILE *tf = fopen(line, "w");
    uint32_t lcg = 7;
    for (int i = 0; i < 800; i++) {
        lcg = lcg * 1103515245u + 12345u;
        fputc("abc "[(lcg >> 16) % 4], tf);
    }
    fclose(tf);
    snprintf(line, sizeof line, "data t = text %s/abc.txt; model g = gpt layers=1 heads=2 dim=16 ctx=16 vocab=4 "
             "seed=5", repo);
    RS_CHECK(rs_repl_line(s, line) == 0, "gpt");
    fflush(out);
    long at = ftell(out);
    RS_CHECK(rs_repl_line(s, "generate g prompt=ab n=24 temp=0.9 top_k=3 seed=4") == 0, "generate");
    fflush(out);
    char gen[256] = {0};
    fseek(out, at, SEEK_SET);
    if (!fgets(gen, sizeof gen, out)) gen[0] = '\0';
    gen[strcspn(gen, "\n")] = '\0';
    fseek(out, 0, SEEK_END);
    snprintf(line, sizeof line, "serve g http=0 grpc=-1 metrics=-1 repo=%s/r2 data=t", repo);
    RS_CHECK(rs_repl_line(s, line) == 0 && s->server, "serve a GPT");
    if (!s->server) return;
    const char *gb = "{\"text_input\":\"ab\",\"parameters\":{\"max_tokens\":24,\"temperature\":0.9,"
                     "\"top_k\":3,\"seed\":4}}";
    char head[256];
    snprintf(head, sizeof head, "POST /v2/models/g/generate HTTP/1.1\r\nContent-Length: %zu", strlen(gb));
    resp r;
    http(rs_serve_http_port(s->server), head, gb, strlen(gb), &r);
    json_t *j = json_loadb(r.body, r.body_n, 0, NULL);
    const char *txt = json_string_value(json_object_get(j, "text_output"));
    RS_CHECK(r.status == 200 && txt && strlen(gen) == 26 && !strcmp(txt, gen + 2),
             "served GPT equals generate: %s vs %s", r.body, gen);
    json_decref(j);
    free(r.raw);
    RS_CHECK(rs_repl_line(s, "serve stop") == 0, "serve stop");
}

/* A compiled plan at the prompt: `serve p` writes 1/model.plan and serves it; the answer equals
 * the session plan run alone; a max_batch above its compiled batch and ranks=2 are refused. */
static void check_plan(rs_session *s, const char *repo)
{
    char line[512];
    snprintf(line, sizeof line, "model c = seq in=1x6x6 conv(3,3,pad=1) relu flatten linear(4) seed=3; "
             "compile c batch=4 -> %s/c.plan; model p = plan %s/c.plan", repo, repo);
    RS_CHECK(rs_repl_line(s, line) == 0, "compile, model = plan");
    snprintf(line, sizeof line, "serve p http=0 grpc=-1 metrics=-1 repo=%s/r3 max_batch=8", repo);
    RS_CHECK(rs_repl_line(s, line) == 1 && !s->server, "max_batch above the plan's batch accepted");
    snprintf(line, sizeof line, "serve %s/c.plan http=0 grpc=-1 metrics=-1 ranks=2", repo);
    RS_CHECK(rs_repl_line(s, line) == 1 && !s->server, "a plan across ranks accepted");
    snprintf(line, sizeof line, "serve p http=0 grpc=-1 metrics=-1 repo=%s/r3", repo);
    RS_CHECK(rs_repl_line(s, line) == 0 && s->server, "serve a plan");
    if (!s->server) return;
    float px[36];
    for (int i = 0; i < 36; i++) px[i] = (float)((i * 7) % 13) / 6.0f - 1.0f;
    char *pb = infer_body(NULL, "input", (const int64_t[]){1, 1, 6, 6}, 4, px);
    RS_CHECK(pb != NULL, "out of memory");
    if (!pb) return;
    const float *pw = NULL;
    rs_err e = {0};
    RS_CHECK(rs_plan_run(rs_session_find(s, "p")->plan, px, 1, &pw, &e) == RS_OK, "%s", e.msg);
    json_t *j;
    int status;
    json_t *d = post_outputs(rs_serve_http_port(s->server), "/v2/models/p/infer", pb, &j, &status);
    free(pb);
    RS_CHECK(status == 200 && json_array_size(d) == 4 && pw, "plan infer %d", status);
    for (size_t i = 0; pw && i < json_array_size(d); i++)
        RS_CHECK_CLOSE(json_number_value(json_array_get(d, i)), pw[i], 1e-5, 1e-5, "plan output");
    json_decref(j);
    resp r;
    http(rs_serve_http_port(s->server), "GET /v2/models/p/config HTTP/1.1", NULL, 0, &r);
    RS_CHECK(r.status == 200 && strstr(r.body, "\"max_batch_size\":4") && strstr(r.body, "ringside_plan"), "%s",
             r.body);
    free(r.raw);
    RS_CHECK(rs_repl_line(s, "infer p n=12 clients=6") == 0, "infer p");
    RS_CHECK(rs_repl_line(s, "serve stop") == 0, "serve stop");
}

/* What the session printed over the three cases. */
static void check_output(FILE *out)
{
    fflush(out);
    rewind(out);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, out);
    text[n] = '\0';
    RS_CHECK(strstr(text, "wrote model repository") && strstr(text, "1 ok / 0 failed, 2 samples in 1 batches") &&
                 strstr(text, "a server is running already") && strstr(text, "server stopped") &&
                 strstr(text, "neither a model of this session"),
             "output:\n%s", text);
    RS_CHECK(strstr(text, "decoupled; 1/model.safetensors, 1/vocab.json"), "the GPT's repository");
    RS_CHECK(strstr(text, "max_batch=8 is larger than the batch 4") && strstr(text, "runs in one process (ranks=1)") &&
                 strstr(text, "platform ringside_plan; 1/model.plan") &&
                 strstr(text, "12 ok, 0 failed") && strstr(text, "every answer equals plan p run alone"),
             "the plan's messages:\n%s", text);
    const char *pd = strstr(text, "plan p run alone on its input: max |diff| ");
    RS_CHECK(pd && strtod(pd + 42, NULL) <= 1e-5, "infer p: %s", pd ? pd : "no max |diff|");
}

int main(void)
{
    char repo[] = "/tmp/rs-serve-repl-XXXXXX";
    if (!mkdtemp(repo)) RS_SKIP("no temporary folder");
    FILE *out = tmpfile();
    rs_session *s = rs_session_new(out);
    s->err = out;
    check_mlp(s, repo);
    check_gpt(s, out, repo);
    check_plan(s, repo);
    check_output(out);
    rs_session_free(s);
    fclose(out);
    char line[600];
    snprintf(line, sizeof line, "rm -rf '%s'", repo);
    if (system(line)) {}
    return rs_test_finish("serve-repl");
}
