/* The loss scaler's rule (see scaler.h), torch's GradScaler.update() step for step. */
#include "scaler.h"

#include <float.h>

void rs_grad_scaler_init(rs_grad_scaler *s, bool enabled, float init, int window)
{
    *s = (rs_grad_scaler){.enabled = enabled, .scale = 1.0f, .growth = 2.0f, .backoff = 0.5f, .window = 2000};
    if (!enabled) return;
    s->scale = init > 0.0f ? init : 65536.0f;
    if (window > 0) s->window = window;
}

bool rs_grad_scaler_update(rs_grad_scaler *s, bool finite)
{
    if (!s->enabled) return true;
    if (!finite) {
        s->scale *= s->backoff;
        if (s->scale < FLT_MIN) s->scale = FLT_MIN; /* a scale of 0 would hide every later overflow */
        s->good = 0;
        s->skipped++;
        return false;
    }
    if (++s->good >= s->window) {
        s->good = 0;
        if (s->scale * s->growth <= FLT_MAX) s->scale *= s->growth;
    }
    return true;
}
