/* A model as text: the spec it re-parses from and the summary `show` prints (see model.h). */
#include "model_internal.h"
#include "tensor_op.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
        char *ns = realloc(b->s, cap);
        if (!ns) return;
        b->s = ns;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static const rs_block *block_starting(const rs_model *m, int layer, int depth)
{
    for (int i = 0; i < m->nblocks; i++)
        if (m->blocks[i].first == layer && m->blocks[i].depth == depth) return &m->blocks[i];
    return NULL;
}

static int block_depth_at(const rs_model *m, int layer)
{
    int d = 0;
    for (int i = 0; i < m->nblocks; i++)
        if (layer >= m->blocks[i].first && layer < m->blocks[i].first + m->blocks[i].count &&
            m->blocks[i].depth + 1 > d)
            d = m->blocks[i].depth + 1;
    return d;
}

char *rs_model_spec(const rs_model *m)
{
    sbuf b = {0};
    char s[64];
    if (m->tokens)
        sb_printf(&b, "seq ctx=%lld", (long long)m->in.d[0]);
    else if (m->in.ndim == 3)
        sb_printf(&b, "seq in=%lldx%lldx%lld", (long long)m->in.d[0], (long long)m->in.d[1], (long long)m->in.d[2]);
    else
        sb_printf(&b, "seq in=%lld", (long long)rs_shape_numel(&m->in));
    /* The blocks open at each layer, outermost first; a block ends after its last layer. Sibling
     * blocks ([ a ] [ b ]) are told apart by where each one starts, not by depth alone. */
    int open[MAX_DEPTH], depth = 0; /* indices of the blocks currently open */
    for (int i = 0; i < m->nlayers; i++) {
        for (int d = 0; d < MAX_DEPTH; d++) {
            const rs_block *bl = block_starting(m, i, d);
            if (!bl) continue;
            while (depth > d) { /* close blocks that end before this one starts */
                sb_printf(&b, " ]");
                depth--;
            }
            open[depth++] = (int)(bl - m->blocks);
            sb_printf(&b, bl->residual ? " res[" : " [");
        }
        /* The add closing a res[ ... ] block is implied by the brackets. */
        if (m->layers[i].cfg.kind != RS_LAYER_ADD) sb_printf(&b, " %s", rs_layer_cfg_str(&m->layers[i].cfg, s, sizeof s));
        while (depth > 0) {
            const rs_block *bl = &m->blocks[open[depth - 1]];
            if (bl->first + bl->count - 1 != i) break;
            sb_printf(&b, " ]");
            depth--;
        }
    }
    while (depth-- > 0) sb_printf(&b, " ]");
    return b.s;
}

static void human_bytes(size_t n, char *buf, size_t len)
{
    if (n < 1024) snprintf(buf, len, "%zu B", n);
    else if (n < 1024 * 1024) snprintf(buf, len, "%.1f KiB", n / 1024.0);
    else snprintf(buf, len, "%.2f MiB", n / (1024.0 * 1024.0));
}

char *rs_model_summary(const rs_model *m)
{
    sbuf b = {0};
    char s[64], cfg[64], by[32], dv[32];
    size_t real = 0;
    for (int i = 0; i < m->ntensors; i++) real += m->tensors[i].numel;
    human_bytes(real * sizeof(float), by, sizeof by);
    if (m->tokens)
        sb_printf(&b, "model %s: %d layer%s, %zu parameters (%s as f32), input %lld tokens, vocabulary %d, on %s\n",
                  m->name, m->nlayers, m->nlayers == 1 ? "" : "s", real, by, (long long)m->in.d[0], rs_model_vocab(m), rs_model_device_str(m, dv, sizeof dv));
    else
        sb_printf(&b, "model %s: %d layer%s, %zu parameters (%s as f32), input %s, %d classes, on %s\n", m->name,
                  m->nlayers, m->nlayers == 1 ? "" : "s", real, by, rs_shape_str(&m->in, s, sizeof s), rs_model_classes(m), rs_model_device_str(m, dv, sizeof dv));
    sb_printf(&b, "  %-8s %-30s %-12s %12s\n", "name", "layer", "output", "params");
    for (int i = 0; i < m->nlayers; i++) {
        const rs_layer *l = &m->layers[i];
        for (int d = 0; d < MAX_DEPTH; d++) {
            const rs_block *bl = block_starting(m, i, d);
            if (bl) sb_printf(&b, "  %*s%-8s %s (%d layers)\n", 2 * d, "", bl->name,
                              bl->residual ? "residual block" : "block", bl->count);
        }
        size_t np = 0;
        for (int j = 0; j < l->np; j++) np += l->p[j].tied ? 0 : l->p[j].numel;
        int d = block_depth_at(m, i);
        /* a generic op shows the operator and the node it came from */
        if (l->op) snprintf(cfg, sizeof cfg, "%.23s %.39s", l->op->type, l->op->name);
        else rs_layer_cfg_str(&l->cfg, cfg, sizeof cfg);
        sb_printf(&b, "  %*s%-*s %-30.30s %-12s %12zu\n", 2 * d, "", 8 - 2 * d > 0 ? 8 - 2 * d : 1, l->name, cfg,
                  rs_shape_str(&l->out, s, sizeof s), np);
    }
    return b.s;
}

