/* The batch loader and the distributed sampler, with PyTorch's semantics (DataLoader over a
 * DistributedSampler), so that a ringside run splits an epoch across ranks exactly as torchrun would
 * and single-process and multi-rank training can be compared sample for sample. */
#ifndef RS_LOADER_H
#define RS_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core/status.h"
#include "engine/data/dataset.h"

/* Start from rs_sampler_cfg_default() and change fields: a zeroed struct has world 0, which is refused. */
typedef struct rs_sampler_cfg {
    int rank, world;      /* this rank in [0, world) */
    bool shuffle;         /* reshuffle every epoch; false: the data set's order */
    bool drop_last;       /* sampler: drop the tail so every rank gets floor(n/W); else pad to ceil(n/W) */
    bool drop_last_batch; /* loader: skip a last batch smaller than the batch size */
    bool draw;            /* nanoGPT's get_batch: position p of an epoch is an index drawn at random
                             (with replacement) from (seed, epoch, p), not a permutation's entry, so
                             nothing of size n is kept: for a text's windows, where n is every
                             character (a 200 MB text: 1.5 GB of indices otherwise). Ranks split the
                             positions as below, so W ranks still see what one process sees. */
    uint64_t seed;        /* must be the same on every rank */
} rs_sampler_cfg;

/* Rank 0 of 1, shuffle, seed 0, nothing dropped: what the loader uses for cfg == NULL. */
rs_sampler_cfg rs_sampler_cfg_default(void);

/* ---- Sampler (torch.utils.data.DistributedSampler) ----
 * An epoch's permutation perm[0..n) is a function of (n, shuffle, seed, epoch) only, so every rank
 * computes the same one without talking. It is extended to total = ceil(n/W)*W by repeating
 * perm[0], perm[1], ... (cycling if n < W), or cut to total = floor(n/W)*W with drop_last. Rank r
 * takes positions r, r+W, r+2W, ... of that sequence: every rank gets total/W samples, and the ranks
 * are disjoint whenever nothing was padded.
 *
 * Contiguous blocks: with batch size b, the union over ranks of batch s is positions
 * [W*s*b, min(W*(s+1)*b, total)) of the (padded or cut) permutation. So W ranks at batch b see exactly
 * the samples one process (world 1, same seed and epoch) sees at batch W*b, and whenever total == n
 * (n divisible by W) the whole epoch agrees batch for batch, the last partial batch included. This is
 * what lets a test prove DDP equals single-process training. */
typedef struct rs_sampler rs_sampler;

/* The permutation of an epoch: perm[0..n) (identity when !shuffle). */
void rs_sampler_epoch_perm(uint32_t n, bool shuffle, uint64_t seed, int epoch, uint32_t *perm);

/* Caller owns the result; epoch 0 is prepared. Fails (NULL, err set) on a bad rank/world or n == 0. */
rs_sampler *rs_sampler_new(uint32_t n, const rs_sampler_cfg *cfg, rs_err *err);
void rs_sampler_free(rs_sampler *s);
/* Recomputes this rank's indices for epoch (no allocation). Call it with the same value on every rank. */
void rs_sampler_set_epoch(rs_sampler *s, int epoch);
int rs_sampler_epoch(const rs_sampler *s);
/* This rank's sample count per epoch: ceil(n/W), or floor(n/W) with drop_last. */
uint32_t rs_sampler_count(const rs_sampler *s);
/* The total over ranks: count * W. */
uint32_t rs_sampler_total(const rs_sampler *s);
/* This rank's indices into the data set for the current epoch, count entries; borrowed from s. NULL
 * with draw (nothing is stored): ask rs_sampler_index. */
const uint32_t *rs_sampler_indices(const rs_sampler *s);
/* This rank's i-th index of the current epoch (i < count), stored or drawn. */
uint32_t rs_sampler_index(const rs_sampler *s, uint32_t i);

/* ---- Loader ---- */
typedef struct rs_loader rs_loader;

/* A loader over d (borrowed: it must outlive the loader) yielding batches of up to `batch` samples of
 * this rank's share. All memory is allocated here; rs_loader_next never allocates. Caller owns it. */
rs_loader *rs_loader_new(const rs_dataset *d, int batch, const rs_sampler_cfg *cfg, rs_err *err);
void rs_loader_free(rs_loader *l);
/* Starts epoch `epoch` from its first batch (reshuffles when cfg->shuffle). Same epoch = replay. */
void rs_loader_set_epoch(rs_loader *l, int epoch);
/* Batches per epoch on this rank (the same on every rank). */
uint32_t rs_loader_batches(const rs_loader *l);
/* Samples per epoch on this rank (rs_sampler_count). */
uint32_t rs_loader_samples(const rs_loader *l);
/* Copies the next batch into x (batch, c*h*w) and y (batch, y_len) and returns its row count: `batch`,
 * or fewer for the last one unless drop_last_batch. x's elements are 4 bytes: floats, or int32 token
 * ids when the data set's `tokens` is set. Returns 0 at the end of the epoch, and keeps
 * returning 0 until rs_loader_set_epoch starts another. */
int rs_loader_next(rs_loader *l, void *x, int32_t *y);
/* The data set indices of the batch the last rs_loader_next returned (its row count entries), for
 * traces and tests; borrowed from l and valid until the next call (a copy: also with draw). */
const uint32_t *rs_loader_last_indices(const rs_loader *l);
const rs_sampler *rs_loader_sampler(const rs_loader *l);

#endif
