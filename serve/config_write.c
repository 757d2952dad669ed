/* rs_serve_config_write: a config in protobuf text format, what `serve` puts in a repository it writes
 * (the parser, config.c, reads it back to the same settings). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static void put_io(char **s, size_t *len, size_t *cap, const char *kind, const rs_serve_io *io);

static void put(char **s, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void put(char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    if (!*s) return;
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(*s + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if ((size_t)k < *cap - *len) {
            *len += (size_t)k;
            return;
        }
        char *nb = realloc(*s, *cap * 2 + (size_t)k);
        if (!nb) {
            free(*s);
            *s = NULL;
            return;
        }
        *s = nb;
        *cap = *cap * 2 + (size_t)k;
    }
}

static void put_io(char **s, size_t *len, size_t *cap, const char *kind, const rs_serve_io *io)
{
    put(s, len, cap, "%s [\n  {\n    name: \"%s\"\n    data_type: %s\n    dims: [ ", kind, io->name,
        rs_serve_dtype_config_name(io->dtype));
    for (int d = 0; d < io->rank; d++) put(s, len, cap, "%s%lld", d ? ", " : "", (long long)io->dims[d]);
    put(s, len, cap, " ]\n  }\n]\n");
}

/* sequence_batching with its control inputs (direct: the one strategy ringside runs) */
static void put_sequence(char **s, size_t *len, size_t *cap, const rs_serve_config *c)
{
    static const char *const kinds[] = {"", "START", "END", "READY", "CORRID"};
    if (!c->sequence_batching) return;
    put(s, len, cap, "sequence_batching {\n  direct { }\n");
    if (c->max_sequence_idle_us)
        put(s, len, cap, "  max_sequence_idle_microseconds: %lld\n", (long long)c->max_sequence_idle_us);
    for (int i = 0; i < c->ninputs; i++) {
        const rs_serve_io *io = &c->inputs[i];
        if (!io->control) continue;
        put(s, len, cap, "  control_input [ { name: \"%s\" control [ { kind: CONTROL_SEQUENCE_%s ", io->name,
            kinds[io->control]);
        if (io->control == RS_SERVE_CTL_CORRID) put(s, len, cap, "data_type: %s", rs_serve_dtype_config_name(io->dtype));
        else
            put(s, len, cap, "%s_false_true: [ %.17g, %.17g ]", io->dtype == RS_SERVE_FP32 ? "fp32"
                                                               : io->dtype == RS_SERVE_BOOL ? "bool" : "int32",
                io->false_true[0], io->false_true[1]);
        put(s, len, cap, " } ] } ]\n");
    }
    put(s, len, cap, "}\n");
}

char *rs_serve_config_write(const rs_serve_config *c)
{
    size_t cap = 1024, len = 0;
    char *s = malloc(cap); /* the caller's */
    if (s) s[0] = '\0';
    put(&s, &len, &cap, "name: \"%s\"\n", c->name);
    if (c->platform[0]) put(&s, &len, &cap, "platform: \"%s\"\n", c->platform);
    if (c->backend[0]) put(&s, &len, &cap, "backend: \"%s\"\n", c->backend);
    put(&s, &len, &cap, "max_batch_size: %d\n", c->max_batch_size);
    for (int i = 0; i < c->ninputs; i++)
        if (!c->inputs[i].control) put_io(&s, &len, &cap, "input", &c->inputs[i]);
    put_sequence(&s, &len, &cap, c);
    for (int i = 0; i < c->noutputs; i++) put_io(&s, &len, &cap, "output", &c->outputs[i]);
    put(&s, &len, &cap, "instance_group [ { count: %d kind: %s } ]\n", c->instance_count ? c->instance_count : 1,
        c->instance_kind[0] ? c->instance_kind : "KIND_CPU");
    if (c->dynamic_batching) {
        put(&s, &len, &cap, "dynamic_batching {\n");
        if (c->npreferred) {
            put(&s, &len, &cap, "  preferred_batch_size: [ ");
            for (int i = 0; i < c->npreferred; i++) put(&s, &len, &cap, "%s%d", i ? ", " : "", c->preferred[i]);
            put(&s, &len, &cap, " ]\n");
        }
        put(&s, &len, &cap, "  max_queue_delay_microseconds: %lld\n", (long long)c->max_queue_delay_us);
        if (c->max_queue_size)
            put(&s, &len, &cap, "  default_queue_policy { max_queue_size: %lld }\n", (long long)c->max_queue_size);
        put(&s, &len, &cap, "}\n");
    }
    if (c->decoupled) put(&s, &len, &cap, "model_transaction_policy { decoupled: true }\n");
    if (c->ranks > 1)
        put(&s, &len, &cap, "parameters { key: \"ranks\" value: { string_value: \"%d\" } }\n", c->ranks);
    if (c->ranks_mode[0])
        put(&s, &len, &cap, "parameters { key: \"ranks_mode\" value: { string_value: \"%s\" } }\n", c->ranks_mode);
    if (c->vpolicy == RS_SERVE_VP_ALL) put(&s, &len, &cap, "version_policy: { all { } }\n");
    else if (c->vpolicy == RS_SERVE_VP_SPECIFIC) {
        put(&s, &len, &cap, "version_policy: { specific { versions: [ ");
        for (int i = 0; i < c->nversions; i++) put(&s, &len, &cap, "%s%lld", i ? ", " : "", (long long)c->versions[i]);
        put(&s, &len, &cap, " ] } }\n");
    } else if (c->latest_n != 1)
        put(&s, &len, &cap, "version_policy: { latest { num_versions: %d } }\n", c->latest_n);
    return s;
}
