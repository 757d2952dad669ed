/* Opening a data set by a short source string, the way a command line or a rank worker names it:
 *   digits[:N]                      built-in generator, N training samples (default 20000), N/6 test
 *   fashion[:DIR]                   Fashion-MNIST from Debian's dataset-fashion-mnist
 *   idx:IMAGES,LABELS[,TIMAGES,TLABELS]   MNIST-format files (plain or .gz)
 *   cifar:FILE[,FILE...]            CIFAR-10 binary batches
 *   csv:FILE                        label column first, features after
 *   text[:builtin|fortunes[=DIR]|FILE][,ctx=N]   character-level text, windows of N (default 64)
 *                                   characters; the built-in corpus when nothing is named
 * Sources without a test part keep 1/6 of the samples aside (seeded split); text keeps its last 10%
 * for validation (and ignores the seed: the built-in corpus is always the same). */
#ifndef RS_DATA_SOURCE_H
#define RS_DATA_SOURCE_H

#include "dataset.h"

rs_status rs_data_open(const char *source, uint64_t seed, rs_data_pair *out, rs_err *err);

#endif
