/* Dynamic loss scaling for fp16 training (torch.cuda.amp.GradScaler): the loss gradient is multiplied
 * by `scale` so that small gradients survive fp16's range (smallest normal 2^-14), the gradients are
 * divided by it again before clipping and the update, and a step whose gradients hold an inf or a NaN
 * (an fp16 overflow) is skipped: the scale halves and the optimizer never sees it. After `window`
 * finite steps in a row the scale doubles, probing back up. bf16 and fp32 have fp32's range and run
 * without it (scale 1, as torch does). Plain data in the training loop's frame. */
#ifndef RS_SCALER_H
#define RS_SCALER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct rs_grad_scaler {
    bool enabled;
    float scale;     /* the loss gradient's multiplier now */
    float growth;    /* 2 */
    float backoff;   /* 0.5 */
    int window;      /* finite steps before the scale grows (2000) */
    int good;        /* finite steps since the last growth or skip */
    int64_t skipped; /* steps skipped for an inf/NaN gradient */
} rs_grad_scaler;

/* torch's defaults (init 2^16, growth 2 every 2000 finite steps, backoff 0.5); init <= 0 or window
 * <= 0 take those. Disabled: scale 1 and nothing ever skipped. */
void rs_grad_scaler_init(rs_grad_scaler *s, bool enabled, float init, int window);
/* After a step's gradients were checked: true when the step is applied (they were finite). A skipped
 * step backs the scale off and is counted; a finite one counts toward growth. */
bool rs_grad_scaler_update(rs_grad_scaler *s, bool finite);

#endif
