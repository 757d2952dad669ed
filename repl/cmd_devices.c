/* `devices` and `set device=`: torch.cuda at the prompt. `devices` answers is_available(),
 * device_count(), and per GPU get_device_properties() (name, memory, compute capability) with the
 * driver and runtime versions; without a GPU it says so and that the CPU is used, as the seed's first
 * example does. `set device=cuda|cuda:N|cpu` chooses the session's device: refused with the reason
 * where there is no GPU. Models are still built on the CPU in this build (the layers and the executor
 * run through the CUDA table once their buffers live on the GPU); `show` names a model's device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas.h"
#include "engine/cuda/cuda.h"
#include "session.h"

static void version(char *buf, size_t n, int v)
{
    if (v > 0) snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
    else snprintf(buf, n, "none");
}

int rs_cmd_devices(rs_session *s, const rs_call *c)
{
    (void)c;
    rs_cuda_info ci;
    rs_cuda_query(&ci);
    char drv[16], rt[16];
    version(drv, sizeof drv, ci.driver_version);
    version(rt, sizeof rt, ci.runtime_version);
    fprintf(s->out, "CUDA available: %s\n", ci.count > 0 ? "yes" : "no");
    fprintf(s->out, "CUDA device count: %d\n", ci.count);
    if (ci.built)
        fprintf(s->out, "CUDA driver %s, runtime %s; kernels built for sm_90 with compute_90 PTX\n", drv, rt);
    else
        fprintf(s->out, "CUDA: not in this build\n");
    for (int i = 0; i < ci.count; i++) {
        rs_cuda_gpu g;
        rs_err err = {0};
        if (rs_cuda_gpu_info(i, &g, &err)) {
            fprintf(s->out, "cuda:%d  %s\n", i, err.msg);
            continue;
        }
        fprintf(s->out, "cuda:%d  %s  compute capability %d.%d  %d SMs  memory %.1f GiB (%.1f GiB free)\n", i, g.name,
                g.cc_major, g.cc_minor, g.sms, (double)g.total_bytes / (1 << 30), (double)g.free_bytes / (1 << 30));
    }
    if (ci.count == 0) fprintf(s->out, "%s\nCUDA not available, using CPU\n", ci.why);
    rs_blas_info b;
    rs_blas_get_info(&b);
    fprintf(s->out, "cpu  %d threads, OpenBLAS %s\n", s->threads, b.core);
    char here[32];
    snprintf(here, sizeof here, s->device.kind == RS_DEV_CUDA ? "cuda:%d" : "cpu", s->device.index);
    fprintf(s->out, "session device: %s\n", here);
    return 0;
}

/* Called by `set` (repl/cmd_session.c) when device= is given; 0 when the session's device changed. */
int rs_cmd_set_device(rs_session *s, const rs_call *c)
{
    const rs_optval *o = rs_call_opt(c, "device");
    const char *v = o && o->text ? o->text : "";
    size_t len = strlen(v);
    if (!strcmp(v, "cpu")) {
        s->device = rs_device_cpu();
        return 0;
    }
    int index = 0;
    if (strncmp(v, "cuda", 4) != 0 || (v[4] && v[4] != ':'))
        return rs_session_error(s, c, o->pos, len + 7, "set: device=%s; cpu, cuda or cuda:N (N from `devices`) work",
                                v);
    if (v[4] == ':') {
        char *end;
        long n = strtol(v + 5, &end, 10);
        if (end == v + 5 || *end || n < 0 || n > 1024)
            return rs_session_error(s, c, o->pos, len + 7, "set: device=%s; the GPU number after cuda: is 0, 1, ...",
                                    v);
        index = (int)n;
    }
    rs_err err = {0};
    if (rs_cuda_use(index, &err))
        return rs_session_error(s, c, o->pos, len + 7, "set: device=%s refused: %s; the session stays on %s", v, err.msg,
                                s->device.kind == RS_DEV_CUDA ? "its GPU" : "the CPU");
    s->device = (rs_device){RS_DEV_CUDA, index};
    rs_cuda_gpu g;
    if (!rs_cuda_gpu_info(index, &g, NULL))
        fprintf(s->out, "device cuda:%d (%s); new models are still built on the CPU in this build\n", index, g.name);
    return 0;
}
