/* One rank of a model served across ranks (see ranks.h): `ringside --worker serve ...`. Every rank loads
 * the whole model file, keeps its part (a range of layers, or a tensor-parallel shard cut from the
 * weights), and then loops: rank 0 reads a batch from the server and broadcasts its size, the ranks
 * compute, rank 0 writes the output back. A batch of size 0 (the server closed the connection) ends
 * the loop on every rank. A failure inside a batch ends the rank with a message (exit 1): the launcher
 * then stops the others and the server reports the ranks' death with what they said. */
#include "ranks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "dist/train/pipe_split.h"
#include "dist/worker/worker.h"
#include "engine/nn/model.h"
#include "engine/nn/tp.h"

typedef struct rjob {
    FILE *out, *errf;
    const char *group, *backend, *model, *mode;
    double timeout;
    bool store_from_launcher;
    int feed, max_batch;
    rs_worker_conn c;
    rs_serve_backend *b;  /* owned: the whole model, as the server loaded it */
    rs_model *m;          /* borrowed from b */
    rs_tp_plan *plan;     /* owned (tensor) */
    rs_model *shard;      /* owned (tensor) */
    rs_acts *acts;        /* owned: on the shard, or on the stage's layers */
    int first, last;      /* pipeline: this rank's layers */
    size_t in_numel, out_numel, bound_in, bound_out; /* per sample */
    rs_err comm_err;
    rs_status comm_st;
} rjob;

static int parse(rjob *j, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t kl = eq ? (size_t)(eq - argv[i]) : 0;
        const char *v = eq ? eq + 1 : "";
        char *end = NULL;
#define KEY(s) (eq && kl == strlen(s) && !strncmp(argv[i], s, kl))
        bool good = true;
        if (KEY("group")) j->group = v;
        else if (KEY("backend")) j->backend = v;
        else if (KEY("model")) j->model = v;
        else if (KEY("mode")) good = !strcmp(v, "pipeline") || !strcmp(v, "tensor"), j->mode = v;
        else if (KEY("store")) j->store_from_launcher = !strcmp(v, "launcher");
        else if (KEY("timeout")) good = (j->timeout = strtod(v, &end)) > 0 && !*end;
        else if (KEY("feed")) good = (j->feed = (int)strtol(v, &end, 10)) > 0 && j->feed < 65536 && !*end;
        else if (KEY("max_batch")) good = (j->max_batch = (int)strtol(v, &end, 10)) > 0 && !*end;
        else good = false;
#undef KEY
        if (!good) {
            fprintf(j->errf, "ringside --worker serve: unknown option or bad value '%s' (model=PATH "
                             "mode=pipeline|tensor feed=PORT max_batch=N)\n", argv[i]);
            return 2;
        }
    }
    if (!j->model || !j->mode || !j->feed) {
        fprintf(j->errf, "ringside --worker serve: model=, mode= and feed= are required\n");
        return 2;
    }
    return 0;
}

static void tp_all_reduce(void *ud, float *buf, size_t n)
{
    rjob *j = ud;
    if (!j->comm_st) j->comm_st = rs_pg_all_reduce(j->c.g, buf, n, RS_F32, RS_SUM, &j->comm_err);
}

static size_t out_numel_of(rs_model *m, int layer)
{
    return layer < 0 ? (size_t)rs_shape_numel(rs_model_input_shape(m))
                     : (size_t)rs_shape_numel(&rs_model_layer(m, layer)->out);
}

/* This rank's part of the model, and a line saying what it holds. */
static rs_status setup(rjob *j, rs_err *err)
{
    rs_status st = rs_serve_backend_load(j->model, &j->b, err);
    if (st) return st;
    j->m = rs_serve_backend_model(j->b);
    int n = rs_model_layer_count(j->m), R = j->c.rank, W = j->c.world;
    j->in_numel = out_numel_of(j->m, -1);
    j->out_numel = out_numel_of(j->m, n - 1);
    if (!strcmp(j->mode, "tensor")) {
        st = rs_tp_plan_new(j->m, W, &j->plan, err);
        if (!st) st = rs_tp_shard_new(j->plan, R, NULL, &j->shard, err);
        if (st) return st;
        rs_model_set_training(j->shard, false);
        rs_model_set_tp_comm(j->shard, tp_all_reduce, j);
        if (!(j->acts = rs_acts_new(j->shard, j->max_batch, err))) return err->code ? err->code : RS_ERR_NOMEM;
        size_t rep, split, bias;
        rs_tp_plan_counts(j->plan, &rep, &split, &bias);
        fprintf(j->out, "tensor shard %d of %d: %d column/row pairs split, %zu of the %zu parameters here\n", R, W,
                rs_tp_plan_pairs(j->plan), rs_model_range_params(j->shard, 0, rs_model_layer_count(j->shard)),
                rs_model_range_params(j->m, 0, n));
        return RS_OK;
    }
    double cost[256];
    int items = rs_pipe_item_params(j->m, cost, 256);
    int cuts[65];
    st = rs_pipe_split_balance(j->m, cost, W, cuts, err);
    (void)items;
    if (st) return st;
    j->first = cuts[R];
    j->last = cuts[R + 1];
    j->bound_in = out_numel_of(j->m, j->first - 1);
    j->bound_out = out_numel_of(j->m, j->last - 1);
    if (!(j->acts = rs_acts_new_range(j->m, j->first, j->last, j->max_batch, err)))
        return err->code ? err->code : RS_ERR_NOMEM;
    fprintf(j->out, "stage %d of %d: layers %d..%d, %zu parameters\n", R, W, j->first, j->last - 1,
            rs_model_range_params(j->m, j->first, j->last));
    return RS_OK;
}

static int connect_feed(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* One batch of B on this rank; rank 0 has x and gets y (B * out_numel). */
static rs_status batch(rjob *j, float *x, int B, float *y, float *buf, rs_err *err)
{
    rs_pg *g = j->c.g;
    int R = j->c.rank, W = j->c.world;
    const float *o = NULL;
    rs_status st;
    if (j->shard) {
        st = rs_pg_broadcast(g, x, (size_t)B * j->in_numel, RS_F32, 0, err);
        j->comm_st = RS_OK;
        if (!st) st = rs_model_forward_acts(j->shard, j->acts, x, B, &o, err);
        if (!st && j->comm_st) st = rs_err_set(err, j->comm_st, "%s", j->comm_err.msg);
        if (!st && R == 0) memcpy(y, o, (size_t)B * j->out_numel * sizeof *y);
        return st;
    }
    const float *in = x;
    if (R > 0) {
        st = rs_pg_recv(g, buf, (size_t)B * j->bound_in, RS_F32, R - 1, err);
        if (st) return st;
        in = buf;
    }
    st = rs_model_forward_range(j->m, j->acts, j->first, j->last, in, B, &o, err);
    if (st) return st;
    if (R < W - 1) st = rs_pg_send(g, o, (size_t)B * j->bound_out, RS_F32, R + 1, err);
    else st = rs_pg_send(g, o, (size_t)B * j->out_numel, RS_F32, 0, err);
    if (!st && R == 0) st = rs_pg_recv(g, y, (size_t)B * j->out_numel, RS_F32, W - 1, err);
    return st;
}

static int serve_loop(rjob *j)
{
    int R = j->c.rank;
    rs_err e = {0};
    size_t cap = (size_t)j->max_batch;
    size_t widest = j->in_numel > j->bound_in ? j->in_numel : j->bound_in;
    float *x = malloc(cap * j->in_numel * sizeof *x);    /* owned: the batch (rank 0) or its broadcast copy */
    float *y = malloc(cap * j->out_numel * sizeof *y);   /* owned: the output (rank 0) */
    float *buf = malloc(cap * widest * sizeof *buf);     /* owned: the previous stage's output */
    int fd = -1, rc = 0;
    if (!x || !y || !buf) {
        fprintf(j->errf, "rank %d: out of memory for a batch of %d\n", R, j->max_batch);
        rc = 1;
    }
    /* every rank has its part before rank 0 tells the server it is ready */
    if (!rc && rs_pg_barrier(j->c.g, &e)) {
        fprintf(j->errf, "rank %d: %s\n", R, e.msg);
        rc = 1;
    }
    if (!rc && R == 0 && (fd = connect_feed(j->feed)) < 0) {
        fprintf(j->errf, "rank 0: cannot reach the server on port %d: %s\n", j->feed, strerror(errno));
        rc = 1;
    }
    while (!rc) {
        int32_t B = 0;
        if (R == 0) {
            uint32_t hdr[2];
            if (!rs_serve_ranks_get_all(fd, hdr, sizeof hdr)) B = 0; /* the server is done */
            else if (hdr[0] < 1 || hdr[0] > (uint32_t)j->max_batch || hdr[1] != hdr[0] * j->in_numel * 4 ||
                     !rs_serve_ranks_get_all(fd, x, hdr[1])) {
                fprintf(j->errf, "rank 0: a malformed batch from the server (%u samples, %u bytes)\n", hdr[0], hdr[1]);
                rc = 1;
                B = 0;
            } else B = (int32_t)hdr[0];
        }
        if (rs_pg_broadcast(j->c.g, &B, 1, RS_I32, 0, &e)) {
            fprintf(j->errf, "rank %d: %s\n", R, e.msg);
            rc = 1;
            break;
        }
        if (B == 0) break;
        if (batch(j, x, B, y, buf, &e)) {
            fprintf(j->errf, "rank %d: a batch of %d: %s\n", R, B, e.msg);
            rc = 1;
            break;
        }
        if (R == 0) {
            uint32_t hdr[2] = {0, (uint32_t)((size_t)B * j->out_numel * sizeof *y)};
            if (!rs_serve_ranks_put_all(fd, hdr, sizeof hdr) || !rs_serve_ranks_put_all(fd, y, hdr[1]))
                break; /* the server went away */
        }
    }
    if (fd >= 0) close(fd);
    free(x);
    free(y);
    free(buf);
    return rc;
}

int rs_serve_rank_main(int argc, char **argv, FILE *out, FILE *errf)
{
    rjob j = {.out = out, .errf = errf, .group = "serve", .backend = "tcp", .timeout = 86400, .max_batch = 1};
    int rc = parse(&j, argc, argv);
    if (rc) return rc;
    rc = rs_worker_join(j.backend, j.group, j.timeout, j.store_from_launcher, errf, &j.c);
    if (!rc) {
        rs_err e = {0};
        if (setup(&j, &e)) {
            fprintf(errf, "rank %d: %s\n", j.c.rank, e.msg);
            rc = 1;
        }
        const char *dev = getenv("CUDA_VISIBLE_DEVICES");
        if (!rc) fprintf(out, "devices: %s\n", dev && *dev ? dev : "cpu (no GPU on this host)");
        fflush(out);
        if (!rc) rc = serve_loop(&j);
    }
    rs_acts_free(j.acts);
    rs_model_free(j.shard);
    rs_tp_plan_free(j.plan);
    rs_serve_backend_free(j.b);
    rs_worker_leave(&j.c, rc == 0, 10);
    return rc;
}
