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

/* A language model counts steps and tokens: its epoch is far longer than a run. */
static void lm_bar(rs_progress *p, const rs_train_event *ev)
{
    const int width = 20;
    double frac = ev->steps_total ? (double)ev->step / (double)ev->steps_total : 0;
    int fill = (int)(frac * width + 0.5);
    char b[64], eta[16];
    for (int i = 0; i < width; i++) b[i] = i < fill ? '#' : '-';
    b[width] = '\0';
    double per_step = ev->batch > 0 ? ev->elapsed_s / (double)ev->batch : 0;
    fmt_eta(per_step * (double)(ev->steps_total - ev->step), eta, sizeof eta);
    fprintf(p->out, "\r\033[K step %lld/%lld [%s] %3.0f%%  %.0f tok/s  loss %.4f  ETA %s", (long long)ev->step,
            (long long)ev->steps_total, b, frac * 100, ev->samples_per_s * ev->rows, ev->loss, eta);
    fflush(p->out);
}

static void bar(rs_progress *p, const rs_train_event *ev)
{
    if (ev->rows > 1) {
        lm_bar(p, ev);
        return;
    }
    const int width = 24;
    double frac = ev->epoch_samples ? (double)ev->samples / (double)ev->epoch_samples : 0;
    int fill = (int)(frac * width + 0.5);
    char b[64], eta[16];
    for (int i = 0; i < width; i++) b[i] = i < fill ? '#' : '-';
    b[width] = '\0';
    fmt_eta(ev->eta_s, eta, sizeof eta);
    fprintf(p->out, "\r\033[K epoch %d/%d [%s] %3.0f%%  %.0f samples/s  loss %.4f  acc %.3f  ETA %s", ev->epoch + 1,
            ev->epochs, b, frac * 100, ev->samples_per_s, ev->epoch_loss, ev->epoch_acc, eta);
    fflush(p->out);
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
            fputc('\n', p->out);
        } else {
            fprintf(p->out, "epoch %d/%d: loss %.4f  acc %.3f  %.0f samples/s  %.1fs\n", ev->epoch + 1, ev->epochs,
                    ev->epoch_loss, ev->epoch_acc, ev->samples_per_s, ev->elapsed_s);
        }
        break;
    case RS_TRAIN_EV_EVAL:
        if (ev->rows > 1) {
            if (p->tty) fputs("\r\033[K", p->out);
            fprintf(p->out, "%sstep %lld/%lld: val loss %.4f%s  train loss %.4f  %.0f tok/s\n", p->color ? "\033[1m" : "",
                    (long long)ev->step, (long long)ev->steps_total, ev->test_loss, p->color ? "\033[0m" : "",
                    ev->epoch_loss, ev->samples_per_s * ev->rows);
            break;
        }
        fprintf(p->out, "%sepoch %d/%d: test accuracy %.4f, test loss %.4f%s\n", p->color ? "\033[1m" : "",
                ev->epoch + 1, ev->epochs, ev->test_acc, ev->test_loss, p->color ? "\033[0m" : "");
        break;
    case RS_TRAIN_EV_CKPT:
        if (p->tty) fputs("\r\033[K", p->out);
        fprintf(p->out, "checkpoint at step %lld -> %s\n", (long long)ev->step, ev->path);
        break;
    default: break;
    }
    fflush(p->out);
}
