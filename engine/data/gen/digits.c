/* digits: handwritten-style digits generated from stroke glyphs (see digits.h).
 * Each digit has several hand-drawn variants written as pen paths in a unit box; every sample wobbles
 * the control points, bends, slants, rotates and scales the strokes, then rasterises them
 * anti-aliased into a 20x20 box centred in 28x28 like MNIST, with varying pen width, blur and noise. */
#include "engine/data/gen/digits.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/rng.h"

#define SIDE 28
#define MAX_PTS 512
#define MAX_STROKES 8

/* Plain compares: fminf/fmaxf must honour NaN and end up as library calls in the inner loop. */
static inline float min2(float a, float b) { return a < b ? a : b; }
static inline float max2(float a, float b) { return a > b ? a : b; }

/* Glyph paths, unit box, y down. x spans about 0.15..0.85 because digits are taller than wide.
 *   M x y                 start a stroke (pen down)
 *   L x y                 line
 *   C x1 y1 x2 y2 x y     cubic Bezier
 *   A cx cy rx ry a0 a1   elliptical arc, angles in degrees, 0 = +x, 90 = down (+y); a1 < a0 runs
 *                         the other way. Joins the current stroke with a line, or starts one.
 * Variants are the ways people actually write each digit, not typefaces: 1 with and without flag and
 * base, 4 open and closed, 7 with and without bar, 2 with and without a loop, and so on. */
#define MAX_VARIANTS 5
static const char *const glyphs[10][MAX_VARIANTS] = {
    {
        "A 0.5 0.5 0.3 0.47 -95 275",
        "M 0.56 0.04 C 0.2 0.0 0.16 0.96 0.5 0.97 C 0.84 0.98 0.84 0.02 0.45 0.06",
        "A 0.5 0.5 0.36 0.46 -80 290",
    },
    {
        "M 0.52 0.0 L 0.48 1.0",
        "M 0.3 0.22 L 0.56 0.0 L 0.54 1.0",
        "M 0.3 0.2 L 0.56 0.0 L 0.55 0.98 M 0.32 1.0 L 0.78 0.98",
        "M 0.4 0.12 C 0.48 0.08 0.52 0.04 0.56 0.0 L 0.5 1.0",
    },
    {
        "M 0.2 0.25 C 0.24 -0.02 0.8 -0.04 0.78 0.27 C 0.76 0.5 0.4 0.72 0.18 0.98 L 0.84 0.96",
        "M 0.2 0.25 C 0.24 -0.02 0.8 -0.04 0.78 0.27 C 0.76 0.5 0.45 0.72 0.32 0.86 "
        "C 0.16 1.04 0.46 1.05 0.44 0.9 C 0.42 0.8 0.26 0.9 0.34 0.97 C 0.42 1.02 0.7 0.97 0.86 0.95",
        "M 0.18 0.2 C 0.3 -0.02 0.78 -0.02 0.76 0.26 C 0.75 0.4 0.6 0.5 0.2 0.98 C 0.4 0.95 0.6 0.97 0.84 1.0",
    },
    {
        "A 0.48 0.27 0.27 0.25 -160 120 A 0.48 0.73 0.31 0.27 -120 160",
        "M 0.2 0.04 L 0.76 0.02 L 0.44 0.42 C 0.7 0.38 0.84 0.55 0.82 0.72 C 0.8 0.92 0.5 1.02 0.2 0.88",
        "M 0.22 0.12 C 0.35 -0.02 0.75 -0.02 0.74 0.22 C 0.73 0.4 0.55 0.47 0.4 0.48 "
        "C 0.62 0.48 0.84 0.58 0.82 0.76 C 0.8 0.98 0.4 1.04 0.18 0.86",
    },
    {
        "M 0.26 0.0 L 0.18 0.6 L 0.86 0.6 M 0.7 0.06 L 0.68 1.0",
        "M 0.62 0.0 L 0.14 0.66 L 0.88 0.66 M 0.62 0.0 L 0.62 1.0",
        "M 0.4 0.0 L 0.16 0.58 L 0.86 0.56 M 0.7 0.16 L 0.66 1.0",
        "M 0.3 0.0 C 0.24 0.2 0.2 0.4 0.2 0.58 C 0.4 0.62 0.7 0.58 0.86 0.54 M 0.66 0.08 C 0.66 0.4 0.64 0.7 0.62 1.0",
    },
    {
        "M 0.8 0.02 L 0.3 0.02 L 0.26 0.44 C 0.5 0.3 0.84 0.4 0.8 0.7 C 0.76 1.0 0.34 1.02 0.18 0.84",
        "M 0.3 0.02 L 0.25 0.46 C 0.45 0.36 0.86 0.4 0.82 0.72 C 0.78 1.02 0.36 1.0 0.2 0.86 "
        "M 0.3 0.02 L 0.82 0.0",
        "M 0.78 0.0 C 0.6 0.04 0.4 0.02 0.3 0.04 C 0.28 0.2 0.26 0.32 0.24 0.46 "
        "C 0.5 0.28 0.8 0.46 0.78 0.68 C 0.76 0.94 0.5 1.02 0.2 0.9",
    },
    {
        "M 0.72 0.02 C 0.45 0.15 0.22 0.42 0.22 0.7 A 0.49 0.72 0.27 0.26 180 -170",
        "M 0.66 0.0 L 0.28 0.56 A 0.5 0.74 0.25 0.24 200 -160",
        "M 0.7 0.04 C 0.4 0.1 0.2 0.5 0.24 0.74 C 0.28 1.02 0.74 1.02 0.76 0.74 "
        "C 0.78 0.46 0.4 0.44 0.25 0.66",
    },
    {
        "M 0.16 0.04 L 0.84 0.04 L 0.4 1.0",
        "M 0.16 0.04 L 0.84 0.04 L 0.4 1.0 M 0.36 0.52 L 0.82 0.5",
        "M 0.16 0.16 L 0.18 0.06 L 0.84 0.02 C 0.62 0.35 0.5 0.6 0.46 1.0",
        "M 0.16 0.04 L 0.84 0.04 C 0.66 0.35 0.56 0.6 0.52 1.0 M 0.4 0.5 L 0.8 0.48",
    },
    {
        "A 0.5 0.25 0.23 0.23 90 -270 A 0.5 0.73 0.28 0.27 -90 270",
        "M 0.72 0.14 C 0.6 -0.04 0.24 -0.02 0.28 0.24 C 0.32 0.44 0.78 0.52 0.78 0.76 "
        "C 0.78 1.02 0.22 1.02 0.22 0.76 C 0.22 0.52 0.7 0.44 0.72 0.22 C 0.73 0.12 0.7 0.08 0.66 0.05",
        "A 0.5 0.26 0.26 0.24 100 -260 A 0.5 0.74 0.26 0.26 -80 280",
    },
    {
        "A 0.48 0.3 0.27 0.27 0 -360 M 0.75 0.3 L 0.72 1.0",
        "A 0.48 0.3 0.27 0.27 10 -355 C 0.76 0.6 0.7 0.85 0.54 1.0",
        "M 0.74 0.12 C 0.6 -0.04 0.2 0.04 0.22 0.3 C 0.24 0.56 0.7 0.54 0.74 0.16 "
        "C 0.74 0.5 0.72 0.75 0.66 1.0",
    },
};

/* Flattened strokes of one sample: stroke k is points [start[k], start[k+1]). */
typedef struct strokes {
    int np, ns;
    int start[MAX_STROKES + 1];
    float x[MAX_PTS], y[MAX_PTS]; /* glyph units until placed, then pixels */
    float r[MAX_PTS];             /* pen radius in pixels at each point */
} strokes;

static void stroke_begin(strokes *s)
{
    if (s->ns < MAX_STROKES) s->start[s->ns++] = s->np;
    s->start[s->ns] = s->np;
}

static void stroke_point(strokes *s, float x, float y)
{
    /* The longest glyph flattens to under 100 points; a full buffer would clip a stroke, never overrun. */
    if (s->np >= MAX_PTS) return;
    s->x[s->np] = x;
    s->y[s->np] = y;
    s->np++;
    s->start[s->ns] = s->np;
}

/* Locale-independent: strtof would read "0.5" as 0 under a comma-decimal LC_NUMERIC. */
static float parse_num(const char **pp)
{
    const char *p = *pp;
    while (*p == ' ') p++;
    float sign = 1.0f, v = 0.0f;
    if (*p == '-') {
        sign = -1.0f;
        p++;
    }
    while (*p >= '0' && *p <= '9') v = v * 10.0f + (float)(*p++ - '0');
    if (*p == '.') {
        p++;
        float f = 0.1f;
        for (; *p >= '0' && *p <= '9'; f *= 0.1f) v += f * (float)(*p++ - '0');
    }
    *pp = p;
    return sign * v;
}

typedef struct jitter {
    rs_rng *rng;
    float wobble; /* std of the per-control-point offset, glyph units */
} jitter;

static void read_point(const char **pp, const jitter *j, float *x, float *y)
{
    *x = parse_num(pp) + j->wobble * rs_rng_normal(j->rng);
    *y = parse_num(pp) + j->wobble * rs_rng_normal(j->rng);
}

/* Turns a glyph path into points, wobbling every control point so no two samples share a skeleton.
 * Lines are subdivided too, so that the smooth bending applied later can curve them. */
static void build_path(const char *path, const jitter *j, strokes *s)
{
    const char *p = path;
    float cx = 0, cy = 0;
    int pen = 0; /* a current point exists */
    for (;;) {
        while (*p == ' ') p++;
        char op = *p;
        if (!op) break;
        p++;
        if (op == 'M') {
            read_point(&p, j, &cx, &cy);
            stroke_begin(s);
            stroke_point(s, cx, cy);
            pen = 1;
        } else if (op == 'L') {
            float x, y;
            read_point(&p, j, &x, &y);
            float len = hypotf(x - cx, y - cy);
            int steps = 1 + (int)(len / 0.2f);
            for (int k = 1; k <= steps; k++) {
                float t = (float)k / (float)steps;
                stroke_point(s, cx + t * (x - cx), cy + t * (y - cy));
            }
            cx = x;
            cy = y;
        } else if (op == 'C') {
            float x1, y1, x2, y2, x3, y3;
            read_point(&p, j, &x1, &y1);
            read_point(&p, j, &x2, &y2);
            read_point(&p, j, &x3, &y3);
            float len = hypotf(x1 - cx, y1 - cy) + hypotf(x2 - x1, y2 - y1) + hypotf(x3 - x2, y3 - y2);
            int steps = 2 + (int)(len / 0.12f);
            for (int k = 1; k <= steps; k++) {
                float t = (float)k / (float)steps, u = 1.0f - t;
                float a = u * u * u, b = 3 * u * u * t, c = 3 * u * t * t, d = t * t * t;
                stroke_point(s, a * cx + b * x1 + c * x2 + d * x3, a * cy + b * y1 + c * y2 + d * y3);
            }
            cx = x3;
            cy = y3;
        } else if (op == 'A') {
            float ox, oy;
            read_point(&p, j, &ox, &oy);
            float rx = parse_num(&p) * (1.0f + 1.5f * j->wobble * rs_rng_normal(j->rng));
            float ry = parse_num(&p) * (1.0f + 1.5f * j->wobble * rs_rng_normal(j->rng));
            /* Where a loop starts and stops is the most personal part of a round digit. */
            float a0 = parse_num(&p) + 300.0f * j->wobble * rs_rng_normal(j->rng);
            float a1 = parse_num(&p) + 300.0f * j->wobble * rs_rng_normal(j->rng);
            int steps = 2 + (int)(fabsf(a1 - a0) / 24.0f);
            if (!pen) stroke_begin(s);
            for (int k = 0; k <= steps; k++) {
                float a = (a0 + (a1 - a0) * (float)k / (float)steps) * 0.017453293f;
                stroke_point(s, ox + rx * cosf(a), oy + ry * sinf(a));
            }
            cx = s->x[s->np - 1];
            cy = s->y[s->np - 1];
            pen = 1;
        } else {
            break; /* unreachable: the table above uses M, L, C and A only */
        }
    }
}

/* Everything random about one sample's look, drawn in a fixed order so it depends on its rng alone. */
typedef struct style {
    float wobble;
    float bend_ax, bend_fx, bend_px, bend_ay, bend_fy, bend_py; /* smooth bending, glyph units */
    float rot, shear, sx, sy;                                   /* affine about the glyph centre */
    float box;                                                  /* outer size of the ink, pixels */
    float tx, ty;                                               /* offset from centre, pixels */
    float radius, press_a, press_l, press_p;                    /* pen radius, pressure wave */
    float blur, gain, noise;
} style;

static void draw_style(rs_rng *r, style *st)
{
    st->wobble = rs_rng_range(r, 0.008f, 0.028f);
    st->bend_ax = rs_rng_range(r, 0.0f, 0.05f);
    st->bend_fx = rs_rng_range(r, 0.4f, 1.2f);
    st->bend_px = rs_rng_range(r, 0.0f, 6.2831853f);
    st->bend_ay = rs_rng_range(r, 0.0f, 0.04f);
    st->bend_fy = rs_rng_range(r, 0.4f, 1.2f);
    st->bend_py = rs_rng_range(r, 0.0f, 6.2831853f);
    st->rot = rs_rng_range(r, -12.0f, 12.0f) * 0.017453293f;
    st->shear = rs_rng_range(r, -0.2f, 0.3f); /* right-handers slant right more often than left */
    st->sx = rs_rng_range(r, 0.75f, 1.2f);
    st->sy = rs_rng_range(r, 0.9f, 1.1f);
    st->box = rs_rng_range(r, 16.5f, 20.5f);
    st->tx = rs_rng_range(r, -1.8f, 1.8f);
    st->ty = rs_rng_range(r, -1.8f, 1.8f);
    st->radius = rs_rng_range(r, 0.8f, 1.75f);
    st->press_a = rs_rng_range(r, 0.0f, 0.3f);
    st->press_l = rs_rng_range(r, 0.4f, 1.5f);
    st->press_p = rs_rng_range(r, 0.0f, 6.2831853f);
    st->blur = rs_rng_range(r, 0.1f, 0.7f);
    st->gain = rs_rng_range(r, 1.0f, 1.35f);
    st->noise = rs_rng_range(r, 0.0f, 0.05f);
}

/* Bends, slants and places the strokes in pixel space, fitting the ink (pen width included) into a
 * box of st->box pixels centred at the image centre plus a small shift, as MNIST fits into 20x20. */
static void place(strokes *s, const style *st)
{
    float c = cosf(st->rot), sn = sinf(st->rot);
    float minx = 1e9f, maxx = -1e9f, miny = 1e9f, maxy = -1e9f;
    for (int i = 0; i < s->np; i++) {
        float x = s->x[i], y = s->y[i];
        x += st->bend_ax * sinf(6.2831853f * st->bend_fx * y + st->bend_px);
        y += st->bend_ay * sinf(6.2831853f * st->bend_fy * x + st->bend_py);
        x = (x - 0.5f) * st->sx;
        y = (y - 0.5f) * st->sy;
        x += st->shear * -y; /* y grows downward: a positive shear leans the top to the right */
        float u = c * x - sn * y, v = sn * x + c * y;
        s->x[i] = u;
        s->y[i] = v;
        minx = min2(minx, u);
        maxx = max2(maxx, u);
        miny = min2(miny, v);
        maxy = max2(maxy, v);
    }
    float ext = max2(max2(maxx - minx, maxy - miny), 1e-3f);
    float scale = (st->box - 2.0f * st->radius) / ext;
    float mx = 0.5f * (minx + maxx), my = 0.5f * (miny + maxy);
    for (int k = 0; k < s->ns; k++) {
        float along = 0.0f;
        for (int i = s->start[k]; i < s->start[k + 1]; i++) {
            if (i > s->start[k]) along += hypotf(s->x[i] - s->x[i - 1], s->y[i] - s->y[i - 1]);
            s->r[i] = st->radius *
                      (1.0f + st->press_a * sinf(6.2831853f * along / st->press_l + st->press_p));
        }
    }
    for (int i = 0; i < s->np; i++) {
        s->x[i] = 0.5f * SIDE + st->tx + scale * (s->x[i] - mx);
        s->y[i] = 0.5f * SIDE + st->ty + scale * (s->y[i] - my);
    }
}

/* Coverage of a round pen of radius ra..rb moving from a to b: 1 inside, a one-pixel linear ramp at
 * the edge (anti-aliasing), max-combined so crossings do not get darker than 1. */
static void draw_segment(float *img, float ax, float ay, float ar, float bx, float by, float br)
{
    float pad = max2(ar, br) + 0.5f; /* coverage is zero beyond r + 0.5 */
    int x0 = (int)(min2(ax, bx) - pad), x1 = (int)(max2(ax, bx) + pad);
    int y0 = (int)(min2(ay, by) - pad), y1 = (int)(max2(ay, by) + pad);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > SIDE - 1) x1 = SIDE - 1;
    if (y1 > SIDE - 1) y1 = SIDE - 1;
    float dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
    float inv = len2 > 1e-12f ? 1.0f / len2 : 0.0f;
    for (int y = y0; y <= y1; y++) {
        float py = (float)y + 0.5f - ay;
        for (int x = x0; x <= x1; x++) {
            float px = (float)x + 0.5f - ax;
            float t = (px * dx + py * dy) * inv;
            t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
            float ex = px - t * dx, ey = py - t * dy;
            float v = min2(ar + t * (br - ar) + 0.5f - sqrtf(ex * ex + ey * ey), 1.0f);
            img[y * SIDE + x] = max2(img[y * SIDE + x], v);
        }
    }
}

/* One separable [1 2 1]/4 pass mixed in by `amount`: soft edges like a scanned pen line. */
static void soften(float *img, float amount)
{
    float tmp[SIDE * SIDE];
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++) {
            float l = x > 0 ? img[y * SIDE + x - 1] : 0.0f, r = x < SIDE - 1 ? img[y * SIDE + x + 1] : 0.0f;
            tmp[y * SIDE + x] = 0.25f * (l + r) + 0.5f * img[y * SIDE + x];
        }
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++) {
            float u = y > 0 ? tmp[(y - 1) * SIDE + x] : 0.0f, d = y < SIDE - 1 ? tmp[(y + 1) * SIDE + x] : 0.0f;
            float b = 0.25f * (u + d) + 0.5f * tmp[y * SIDE + x];
            img[y * SIDE + x] += amount * (b - img[y * SIDE + x]);
        }
}

static int n_variants(int digit)
{
    int k = 0;
    while (k < MAX_VARIANTS && glyphs[digit][k]) k++;
    return k;
}

/* Label of sample i: a fresh permutation of 0..9 for every block of ten, so classes stay balanced
 * within one for any n and the label of i does not depend on n. */
static int label_of(const rs_rng *labels, uint64_t i)
{
    rs_rng r = rs_rng_fork(labels, i / 10);
    uint32_t perm[10];
    for (uint32_t k = 0; k < 10; k++) perm[k] = k;
    rs_rng_shuffle_u32(&r, perm, 10);
    return (int)perm[i % 10];
}

static void render(rs_rng *r, int digit, float *img)
{
    style st;
    draw_style(r, &st);
    int variant = (int)rs_rng_below(r, (uint64_t)n_variants(digit));
    strokes s;
    s.np = s.ns = 0;
    s.start[0] = 0;
    jitter j = {r, st.wobble};
    build_path(glyphs[digit][variant], &j, &s);
    place(&s, &st);
    memset(img, 0, sizeof(float) * SIDE * SIDE);
    for (int k = 0; k < s.ns; k++)
        for (int i = s.start[k] + 1; i < s.start[k + 1]; i++)
            draw_segment(img, s.x[i - 1], s.y[i - 1], s.r[i - 1], s.x[i], s.y[i], s.r[i]);
    soften(img, st.blur);
    /* Noise from raw bits (a sum of two uniforms, close enough to Gaussian for sensor grain):
     * Box-Muller per pixel would cost more than the drawing. */
    for (int p = 0; p < SIDE * SIDE; p += 2) {
        uint64_t b = rs_rng_u64(r);
        float n0 = (float)(b & 0xffff) + (float)((b >> 16) & 0xffff) - 65535.0f;
        float n1 = (float)((b >> 32) & 0xffff) + (float)(b >> 48) - 65535.0f;
        float v0 = img[p] * st.gain + st.noise * n0 * (1.0f / 32768.0f);
        float v1 = img[p + 1] * st.gain + st.noise * n1 * (1.0f / 32768.0f);
        img[p] = v0 < 0.0f ? 0.0f : v0 > 1.0f ? 1.0f : v0;
        img[p + 1] = v1 < 0.0f ? 0.0f : v1 > 1.0f ? 1.0f : v1;
    }
}

static const char *const class_names[10] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

static rs_status check_n(const char *what, uint32_t n, rs_err *err)
{
    if (n == 0 || n > RS_DATA_DIGITS_MAX_N)
        return rs_err_set(err, RS_ERR_ARG,
                          "digits: %s=%u is out of range; use 1..%u (e.g. %s=20000)", what, n,
                          RS_DATA_DIGITS_MAX_N, what);
    return RS_OK;
}

/* Split 0 is the plain/train stream, split 1 the test stream: forks of the seed, hence disjoint. */
static rs_status generate(uint32_t n, uint64_t seed, uint64_t split, rs_dataset **out, rs_err *err)
{
    rs_dataset *d = rs_dataset_new(n, 1, SIDE, SIDE, 10); /* caller owns it on success */
    if (!d)
        return rs_err_set(err, RS_ERR_NOMEM, "digits: no memory for %u samples (%.1f MB); try a smaller n",
                          n, (double)n * SIDE * SIDE * 4 / 1e6);
    rs_rng root;
    rs_rng_seed(&root, seed);
    rs_rng stream = rs_rng_fork(&root, split);
    rs_rng samples = rs_rng_fork(&stream, 0), labels = rs_rng_fork(&stream, 1);
    int64_t count = (int64_t)n;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        rs_rng r = rs_rng_fork(&samples, (uint64_t)i);
        int digit = label_of(&labels, (uint64_t)i);
        d->y[i] = digit;
        render(&r, digit, d->x + (size_t)i * SIDE * SIDE);
    }
    d->class_names = class_names;
    snprintf(d->name, sizeof d->name, "%s", split ? "digits-test" : "digits");
    snprintf(d->source, sizeof d->source, "digits(n=%u,seed=%llu%s)", n, (unsigned long long)seed,
             split ? ",split=test" : "");
    *out = d;
    return RS_OK;
}

rs_status rs_data_digits(uint32_t n, uint64_t seed, rs_dataset **out, rs_err *err)
{
    if (!out) return rs_err_set(err, RS_ERR_ARG, "digits: out is NULL");
    *out = NULL;
    rs_status st = check_n("n", n, err);
    if (st) return st;
    return generate(n, seed, 0, out, err);
}

rs_status rs_data_digits_pair(uint32_t n_train, uint32_t n_test, uint64_t seed, rs_data_pair *out,
                              rs_err *err)
{
    if (!out) return rs_err_set(err, RS_ERR_ARG, "digits: out is NULL");
    out->train = out->test = NULL;
    rs_status st = check_n("n_train", n_train, err);
    if (!st) st = check_n("n_test", n_test, err);
    if (!st) st = generate(n_train, seed, 0, &out->train, err);
    if (!st) st = generate(n_test, seed, 1, &out->test, err);
    if (st) {
        rs_data_pair_clear(out);
        return st;
    }
    snprintf(out->train->name, sizeof out->train->name, "digits-train");
    return RS_OK;
}

void rs_data_digits_ascii(const float *img, char *buf, size_t n)
{
    static const char ramp[] = " .:-=+*#%@";
    if (!buf || n == 0) return;
    size_t k = 0;
    for (int row = 0; row < SIDE / 2 && k + 1 < n; row++) {
        for (int x = 0; x < SIDE && k + 1 < n; x++) {
            float a = img[(2 * row) * SIDE + x], b = img[(2 * row + 1) * SIDE + x];
            /* Between mean and max, so a one-pixel-high bar still shows. */
            float v = 0.5f * (0.5f * (a + b) + max2(a, b));
            int level = (int)(v * 9.999f);
            buf[k++] = ramp[level < 0 ? 0 : level > 9 ? 9 : level];
        }
        if (k + 1 < n) buf[k++] = '\n';
    }
    buf[k] = '\0';
}
