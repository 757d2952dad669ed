/* Progress bar and epoch lines (see progress.h). */
#include "progress.h"

#include "wrap.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void rs_progress_init(rs_progress *p, FILE *out)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    const char *term = getenv("TERM");
    p->tty = isatty(rs_wrap_fd(out)) && !(term && !strcmp(term, "dumb"));
    p->color = p->tty && !getenv("NO_COLOR");
}

static void fmt_eta(double s, char *buf, size_t n)
{
    if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

/* "\r\033[K" then head, a bar of `frac` and tail, the bar as wide as the terminal leaves (24 at most,
 * 5 at least; tail's last fields give way before that): a line that wrapped could not be redrawn in
 * place. */
static void draw_line(rs_progress *p, const char *head, double frac, const char *const *tail, int ntail)
{
    int room = rs_wrap_cols(p->out) - 1, used = (int)strlen(head) + 3, n = ntail;
    for (int i = 0; i < n; i++) used += (int)strlen(tail[i]);
    while (n > 1 && room - used < 5) used -= (int)strlen(tail[--n]);
    int width = room - used < 24 ? room - used : 24;
    if (width < 5) width = 5;
    int fill = (int)(frac * width + 0.5);
    char b[32];
    for (int i = 0; i < width; i++) b[i] = i < fill ? '#' : '-';
    b[width] = '\0';
    fprintf(p->out, "\r\033[K%s [%s]", head, b);
    for (int i = 0; i < n; i++) fputs(tail[i], p->out);
    fflush(p->out);
    p->open = true;
}

void rs_progress_close(rs_progress *p)
{
    if (!p->open) return;
    fputc('\n', p->out);
    fflush(p->out);
    p->open = false;
}

void rs_progress_count(rs_progress *p, const char *what, uint64_t done, uint64_t total, double elapsed_s)
{
    if (!p->tty) return;
    double t = now_s();
    if (done < total && t - p->last_draw < 0.1) return;
    p->last_draw = t;
    double frac = total ? (double)done / (double)total : 1;
    char head[64], t0[48], t1[48], eta[16];
    snprintf(head, sizeof head, " %s %llu/%llu", what, (unsigned long long)done, (unsigned long long)total);
    snprintf(t0, sizeof t0, " %3.0f%%", frac * 100);
    fmt_eta(done ? elapsed_s / (double)done * (double)(total - done) : 0, eta, sizeof eta);
    snprintf(t1, sizeof t1, "  ETA %s", eta);
    const char *tail[2] = {t0, t1};
    draw_line(p, head, frac, tail, 2);
    if (done >= total) { /* the figures follow on a line of their own */
        fputs("\r\033[K", p->out);
        p->open = false;
    }
}

/* A language model counts steps and tokens: its epoch is far longer than a run. */
static void lm_bar(rs_progress *p, const rs_train_event *ev)
{
    double frac = ev->steps_total ? (double)ev->step / (double)ev->steps_total : 0;
    char head[48], t[4][48], eta[16];
    double per_step = ev->batch > 0 ? ev->elapsed_s / (double)ev->batch : 0;
    fmt_eta(per_step * (double)(ev->steps_total - ev->step), eta, sizeof eta);
    snprintf(head, sizeof head, " step %lld/%lld", (long long)ev->step, (long long)ev->steps_total);
    snprintf(t[0], sizeof t[0], " %3.0f%%", frac * 100);
    snprintf(t[1], sizeof t[1], "  loss %.4f", ev->loss);
    snprintf(t[2], sizeof t[2], "  ETA %s", eta);
    snprintf(t[3], sizeof t[3], "  %.0f tok/s", ev->samples_per_s * ev->rows);
    const char *tail[4] = {t[0], t[1], t[2], t[3]};
    draw_line(p, head, frac, tail, 4);
}

static void bar(rs_progress *p, const rs_train_event *ev)
{
    if (ev->rows > 1) {
        lm_bar(p, ev);
        return;
    }
    double frac = ev->epoch_samples ? (double)ev->samples / (double)ev->epoch_samples : 0;
    char head[48], t[5][48], eta[16];
    fmt_eta(ev->eta_s, eta, sizeof eta);
    snprintf(head, sizeof head, " epoch %d/%d", ev->epoch + 1, ev->epochs);
    snprintf(t[0], sizeof t[0], " %3.0f%%", frac * 100);
    snprintf(t[1], sizeof t[1], "  loss %.4f", ev->epoch_loss);
    snprintf(t[2], sizeof t[2], "  acc %.3f", ev->epoch_acc);
    snprintf(t[3], sizeof t[3], "  ETA %s", eta);
    snprintf(t[4], sizeof t[4], "  %.0f samples/s", ev->samples_per_s);
    char sk[48];
    snprintf(sk, sizeof sk, "  skipped %lld", (long long)ev->skipped);
    const char *tail[6] = {t[0], t[1], t[2], t[3], t[4], sk};
    draw_line(p, head, frac, tail, ev->prec == RS_PREC_FP16 ? 6 : 5);
}

void rs_progress_event(void *ud, const rs_train_event *ev)
{
    rs_progress *p = ud;
    switch (ev->kind) {
    case RS_TRAIN_EV_STEP:
        if (p->tty) {
            double t = now_s();
            if (t - p->last_draw >= 0.1) {
                p->last_draw = t;
                bar(p, ev);
            }
        }
        break;
    case RS_TRAIN_EV_EPOCH:
        if (p->tty) {
            bar(p, ev);
            rs_progress_close(p);
        } else if (ev->rows > 1) { /* a language model's lines are its evaluations */
        } else {
            fprintf(p->out, "epoch %d/%d: ", ev->epoch + 1, ev->epochs);
            if (ev->batch < ev->batches) /* steps= ended the run inside the epoch */
                fprintf(p->out, "%lld of %lld steps, ", (long long)ev->batch, (long long)ev->batches);
            fprintf(p->out, "loss %.4f  acc %.3f  %.0f samples/s  %.1fs", ev->epoch_loss, ev->epoch_acc,
                    ev->samples_per_s, ev->elapsed_s);
            if (ev->prec == RS_PREC_FP16)
                fprintf(p->out, "  skipped %lld (scale %g)", (long long)ev->skipped, (double)ev->loss_scale);
            fputc('\n', p->out);
        }
        break;
    case RS_TRAIN_EV_EVAL:
        if (ev->rows > 1) {
            if (p->tty && p->open) fputs("\r\033[K", p->out);
            p->open = false;
            /* nanoGPT's line: both losses estimated now on as many windows (train_eval_loss); a run
             * without eval_every has only the epoch's running mean, and says so */
            fprintf(p->out, "%sstep %lld/%lld: val loss %.4f%s  ", p->color ? "\033[1m" : "", (long long)ev->step,
                    (long long)ev->steps_total, ev->test_loss, p->color ? "\033[0m" : "");
            if (ev->train_eval_loss >= 0) fprintf(p->out, "train loss %.4f", ev->train_eval_loss);
            else fprintf(p->out, "train loss %.4f (mean of the epoch)", ev->epoch_loss);
            fprintf(p->out, "  %.0f tok/s\n", ev->samples_per_s * ev->rows);
            break;
        }
        rs_progress_close(p);
        fprintf(p->out, "%sepoch %d/%d: test accuracy %.4f, test loss %.4f%s\n", p->color ? "\033[1m" : "",
                ev->epoch + 1, ev->epochs, ev->test_acc, ev->test_loss, p->color ? "\033[0m" : "");
        break;
    case RS_TRAIN_EV_CKPT:
        if (p->tty && p->open) fputs("\r\033[K", p->out);
        p->open = false;
        fprintf(p->out, "checkpoint at step %lld -> %s\n", (long long)ev->step, ev->path);
        break;
    case RS_TRAIN_EV_END: rs_progress_close(p); break;
    default: break;
    }
    fflush(p->out);
}
