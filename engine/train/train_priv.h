/* What train.c (evaluation) and train_loop.c (the loop's running accuracy) share, private to
 * engine/train. */
#ifndef RS_TRAIN_PRIV_H
#define RS_TRAIN_PRIV_H

/* The index of the largest of C scores (the first one on a tie), as torch.argmax picks it. */
static inline int rs_train_argmax(const float *z, int C)
{
    int best = 0;
    for (int j = 1; j < C; j++)
        if (z[j] > z[best]) best = j;
    return best;
}

#endif
