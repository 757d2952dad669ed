/* The layer registry (from engine/nn/layers.def), what is read across the descriptors (names,
 * completion words, synopses, activations), configuration defaults and helpers shared by kinds. */
#include "layer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rs_layer_ops *const ops_by_kind[RS_LAYER_KIND_COUNT] = {
#define RS_LAYER(E, ops) [RS_LAYER_##E] = &rs_##ops##_ops,
#include "engine/nn/layers.def"
#undef RS_LAYER
};

const rs_layer_ops *rs_layer_ops_for(rs_layer_kind k)
{
    return (unsigned)k < RS_LAYER_KIND_COUNT ? ops_by_kind[k] : NULL;
}

const char *rs_layer_kind_name(rs_layer_kind k)
{
    const rs_layer_ops *o = rs_layer_ops_for(k);
    return o ? o->kind : "?";
}

rs_layer_kind rs_layer_kind_by_name(const char *word)
{
    for (int k = 0; k < RS_LAYER_KIND_COUNT; k++)
        if (!ops_by_kind[k]->unspelled && !strcmp(word, ops_by_kind[k]->kind)) return (rs_layer_kind)k;
    return RS_LAYER_KIND_COUNT;
}

/* Lists derived from the descriptors once and read-only after: every caller sees the same. */
static struct {
    pthread_once_t once;
    const char *names[RS_LAYER_KIND_COUNT + 1];
    const char *words[RS_LAYER_KIND_COUNT + 1];
    char synopses[1024];
} lists = {.once = PTHREAD_ONCE_INIT};

static void make_lists(void)
{
    int nn = 0, nw = 0;
    size_t at = 0;
    for (int k = 0; k < RS_LAYER_KIND_COUNT; k++) {
        const rs_layer_ops *o = ops_by_kind[k];
        if (o->unspelled) continue;
        lists.names[nn++] = o->kind;
        if (!o->word) continue;
        lists.words[nw++] = o->word;
        int w = snprintf(lists.synopses + at, sizeof lists.synopses - at, "%s%s", at ? ", " : "",
                         o->synopsis ? o->synopsis : o->kind);
        if (w > 0 && at + (size_t)w < sizeof lists.synopses) at += (size_t)w;
    }
}

const char *const *rs_layer_names(void)
{
    pthread_once(&lists.once, make_lists);
    return lists.names;
}

const char *const *rs_layer_words(void)
{
    pthread_once(&lists.once, make_lists);
    return lists.words;
}

const char *rs_layer_synopses(void)
{
    pthread_once(&lists.once, make_lists);
    return lists.synopses;
}

bool rs_layer_for_unary(int op, rs_layer_cfg *c)
{
    for (int k = 0; k < RS_LAYER_KIND_COUNT; k++) {
        rs_layer_cfg t = rs_layer_cfg_default((rs_layer_kind)k);
        if (ops_by_kind[k]->from_unary && ops_by_kind[k]->from_unary(op, &t)) {
            *c = t;
            return true;
        }
    }
    return false;
}

int rs_layer_unary(const rs_layer *l)
{
    return l->ops->unary_of ? l->ops->unary_of(&l->cfg) : -1;
}

rs_layer_cfg rs_layer_cfg_default(rs_layer_kind k)
{
    rs_layer_cfg c = {.kind = k, .bias = true, .eps = 1e-5f, .p = 0.5f, .heads = 1};
    c.kh = c.kw = c.sh = c.sw = 2;
    const rs_layer_ops *o = rs_layer_ops_for(k);
    if (o && o->defaults) o->defaults(&c);
    return c;
}

/* The shortest of %g, %.7g, %.9g that reads back as the same float: "0.1", not "0.100000001", and
 * never a value the parser would refuse (0.99999994 is not "1"). */
const char *rs_layer_flt(float v, char *buf, size_t n)
{
    if (!buf || n == 0) return "";
    snprintf(buf, n, "%g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.7g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", (double)v);
    return buf;
}

void rs_layer_spell_window(const rs_layer_cfg *c, int def_stride, char *buf, size_t n)
{
    int k = 0;
    buf[0] = '\0';
#define PUT(...)                                                                                       \
    do {                                                                                               \
        if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, __VA_ARGS__);               \
    } while (0)
    if (c->kh == c->kw) PUT("%d", c->kh);
    else PUT("%dx%d", c->kh, c->kw);
    if (c->sh != def_stride || c->sw != def_stride) {
        if (c->sh == c->sw) PUT(",stride=%d", c->sh);
        else PUT(",stride=%dx%d", c->sh, c->sw);
    }
    if (c->ph || c->pw) {
        if (c->ph == c->pw) PUT(",pad=%d", c->ph);
        else PUT(",pad=%dx%d", c->ph, c->pw);
    }
#undef PUT
}

char *rs_layer_cfg_str(const rs_layer_cfg *c, char *buf, size_t n)
{
    const rs_layer_ops *o = rs_layer_ops_for(c->kind);
    if (o && o->spell) o->spell(c, buf, n);
    else snprintf(buf, n, "%s", rs_layer_kind_name(c->kind));
    return buf;
}

rs_status rs_layer_window_geom(rs_layer *l, const rs_shape *in, int out_channels, rs_err *err)
{
    const rs_layer_cfg *c = &l->cfg;
    char s[64];
    if (in->ndim != 3)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (%s) needs a (channels, height, width) input, got %s; "
                          "images keep that shape until a flatten",
                          l->name, l->ops->kind, rs_shape_str(in, s, sizeof s));
    if (c->kh < 1 || c->kw < 1 || c->sh < 1 || c->sw < 1 || c->ph < 0 || c->pw < 0)
        return rs_err_set(err, RS_ERR_ARG, "layer %s (%s): kernel and stride must be >= 1, padding >= 0",
                          l->name, l->ops->kind);
    if (l->ops != &rs_conv2d_ops && (c->ph * 2 > c->kh || c->pw * 2 > c->kw))
        return rs_err_set(err, RS_ERR_ARG, "layer %s (%s): padding %dx%d is more than half the %dx%d window",
                          l->name, l->ops->kind, c->ph, c->pw, c->kh, c->kw);
    rs_conv_geom *g = &l->geom;
    g->c = (int)in->d[0];
    g->h = (int)in->d[1];
    g->w = (int)in->d[2];
    g->oc = out_channels ? out_channels : g->c;
    g->kh = c->kh;
    g->kw = c->kw;
    g->sh = c->sh;
    g->sw = c->sw;
    g->ph = c->ph;
    g->pw = c->pw;
    int eh = g->h + 2 * g->ph - g->kh, ew = g->w + 2 * g->pw - g->kw;
    if (eh < 0 || ew < 0)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "layer %s (%s): a %dx%d window does not fit the %dx%d input (padding %dx%d)",
                          l->name, l->ops->kind, g->kh, g->kw, g->h, g->w, g->ph, g->pw);
    g->oh = eh / g->sh + 1;
    g->ow = ew / g->sw + 1;
    l->out = (rs_shape){3, {g->oc, g->oh, g->ow}};
    return RS_OK;
}

void rs_layer_init_uniform(float *x, size_t n, float bound, rs_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = rs_rng_range(rng, -bound, bound);
}

void rs_layer_init_normal(float *x, size_t n, float std, rs_rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = std * rs_rng_normal(rng);
}

int64_t rs_layer_rows(const rs_shape *s, int B)
{
    int64_t last = s->ndim ? s->d[s->ndim - 1] : 1;
    return last > 0 ? (int64_t)B * rs_shape_numel(s) / last : 0;
}
