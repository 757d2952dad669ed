/* `devices` and `set device=`: torch.cuda at the prompt. `devices` answers is_available(),
 * device_count(), and per GPU get_device_properties() (name, memory, compute capability) with the
 * driver and runtime versions; without a GPU it says so and that the CPU is used, as the seed's first
 * example does. `set device=cuda|cuda:N|cpu|guard` chooses the session's device, where new models are
 * built; refused with the reason where there is no GPU. `to MODEL DEVICE` moves one (model.to);
 * `show` names a model's device. `guard` is the test device (engine/guard/): the CPU's kernels on
 * memory the host cannot touch between calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas.h"
#include "engine/cuda/cuda.h"
#include "result.h"
#include "session.h"

static void version(char *buf, size_t n, int v)
{
    if (v > 0) snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
    else snprintf(buf, n, "none");
}

int rs_cmd_devices(rs_session *s, const rs_call *c)
{
    (void)c;
    rs_result_begin(s, NULL);
    rs_cuda_info ci;
    rs_cuda_query(&ci);
    rs_result_num(s, "gpus", ci.count);
    rs_result_num(s, "cuda_available", ci.count > 0);
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
    fprintf(s->out, "session device: %s\n", rs_repl_device_str(s->device, here, sizeof here));
    return 0;
}

/* "cpu", "cuda", "cuda:N" or "guard" -> *d, checked usable here (a GPU the driver reports, made the
 * thread's current one). Returns 0, or 1 after reporting at [pos, pos+len) as `who` ("set: device=",
 * "to:"), saying what stays where. */
int rs_repl_device_parse(rs_session *s, const rs_call *c, const char *who, const char *v, size_t pos, size_t len,
                         const char *stays, rs_device *d)
{
    if (!strcmp(v, "cpu")) {
        *d = rs_device_cpu();
        return 0;
    }
    if (!strcmp(v, "guard")) {
        *d = (rs_device){RS_DEV_GUARD, 0};
        return 0;
    }
    int index = 0;
    if (strncmp(v, "cuda", 4) != 0 || (v[4] && v[4] != ':'))
        return rs_session_error(s, c, pos, len,
                                "%s%s; cpu, cuda, cuda:N (N from `devices`) or guard (the test device) work", who, v);
    if (v[4] == ':') {
        char *end;
        long n = strtol(v + 5, &end, 10);
        if (end == v + 5 || *end || n < 0 || n > 1024)
            return rs_session_error(s, c, pos, len, "%s%s; the GPU number after cuda: is 0, 1, ...", who, v);
        index = (int)n;
    }
    rs_err err = {0};
    if (rs_cuda_use(index, &err))
        return rs_session_error(s, c, pos, len, "%s%s refused: %s; %s", who, v, err.msg, stays);
    *d = (rs_device){RS_DEV_CUDA, index};
    return 0;
}

const char *rs_repl_device_str(rs_device d, char *buf, size_t n)
{
    if (d.kind == RS_DEV_CUDA) snprintf(buf, n, "cuda:%d", d.index);
    else snprintf(buf, n, "%s", rs_device_name(d));
    return buf;
}

/* Called by `set` (repl/cmd_session.c) when device= is given; 0 when the session's device changed. */
int rs_cmd_set_device(rs_session *s, const rs_call *c)
{
    const rs_optval *o = rs_call_opt(c, "device");
    const char *v = o && o->text ? o->text : "";
    char here[32], stays[64];
    snprintf(stays, sizeof stays, "the session stays on %s",
             s->device.kind == RS_DEV_CUDA ? "its GPU" : s->device.kind == RS_DEV_CPU ? "the CPU"
                                                                                    : rs_repl_device_str(s->device, here, sizeof here));
    rs_device d;
    if (rs_repl_device_parse(s, c, "set: device=", v, o->pos, strlen(v) + 7, stays, &d)) return 1;
    s->device = d;
    rs_cuda_gpu g;
    if (d.kind == RS_DEV_CUDA && !rs_cuda_gpu_info(d.index, &g, NULL))
        fprintf(s->out, "device cuda:%d (%s): new models are built there; `to NAME cuda` moves one\n", d.index, g.name);
    else if (d.kind == RS_DEV_GUARD)
        fprintf(s->out, "device guard: the CPU's kernels on memory sealed between calls (a check that nothing "
                        "reads a device's memory directly); new models are built there\n");
    return 0;
}

/* `to MODEL DEVICE`: torch's model.to(device). */
int rs_cmd_to(rs_session *s, const rs_call *c)
{
    rs_result_begin(s, NULL);
    rs_obj *o = rs_session_find(s, c->args[0]);
    size_t pos = c->arg_pos[0], len = strlen(c->args[0]);
    if (rs_session_check_busy(s, c, o, pos, len)) return 1;
    if (o->plan)
        return rs_session_error(s, c, pos, len, "to: %s is a compiled plan; plans run on the CPU they were built for",
                                o->name);
    char was[32], stays[96];
    snprintf(stays, sizeof stays, "%s stays on %s", o->name,
             rs_repl_device_str(rs_model_device(o->model), was, sizeof was));
    rs_device d;
    if (rs_repl_device_parse(s, c, "to: ", c->args[1], c->arg_pos[1], strlen(c->args[1]), stays, &d)) return 1;
    rs_err err = {0};
    char now[32];
    rs_repl_device_str(d, now, sizeof now);
    if (!strcmp(now, was)) {
        fprintf(s->out, "%s is already on %s\n", o->name, now);
        return 0;
    }
    if (rs_model_to(o->model, d, &err))
        return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]), "to: %s; %s", err.msg, stays);
    rs_model_set_threads(o->model, s->threads);
    /* what the allocator holds for the parameters now: the new device's blocks, the old ones given back */
    const rs_mem *mem = rs_model_mem(o->model);
    double live = (double)mem->live[RS_POOL_PARAMS];
    rs_result_num(s, "params", (double)rs_model_param_count(o->model));
    rs_result_num(s, "copied_bytes", 4.0 * (double)rs_model_numel(o->model));
    rs_result_num(s, "memory.params", live);
    fprintf(s->out, "%s: %s -> %s (%zu parameters, %.1f KiB copied through host memory; its parameter pool now "
            "holds %.1f KiB, measured)\n", o->name, was, now, rs_model_param_count(o->model),
            (double)rs_model_numel(o->model) * 4 / 1024, live / 1024);
    return 0;
}
