/* A large text costs what its tokens cost, not 8 bytes more per character. A 48 MB text is made in
 * memory, then parsed (its tokens: one byte each) and a small GPT trains two steps on it. The process's
 * peak resident memory (VmHWM in /proc/self/status, the kernel's figure) may grow from before the parse
 * by the tokens plus a margin for the model and the batch, well under what an index list of every
 * window (4 bytes a character, twice: a permutation and the rank's share) would add. The windows are
 * drawn as nanoGPT's get_batch draws them; the test also checks that the two steps read windows
 * spread over the text, not its beginning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data.h"
#include "engine/data/loader.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/rs_test.h"

#define TEXT_BYTES (48u << 20)

/* VmHWM of this process in bytes, or -1. */
static long long vm_hwm(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atoll(line + 6);
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

int main(void)
{
    uint8_t *buf = malloc(TEXT_BYTES);
    RS_CHECK(buf != NULL, "out of memory for the text");
    if (!buf) return rs_test_finish("engine-text-mem");
    /* words of lowercase letters over 27 characters, from a fixed LCG */
    uint32_t r = 12345;
    for (size_t i = 0; i < TEXT_BYTES; i++) {
        r = r * 1103515245u + 12345u;
        uint32_t v = (r >> 16) % 32;
        buf[i] = v < 26 ? (uint8_t)('a' + v) : (v == 31 ? '\n' : ' ');
    }
    long long before = vm_hwm();
    RS_CHECK(before > 0, "no VmHWM in /proc/self/status");
    rs_data_pair d = {0};
    rs_err e = {0};
    RS_CHECK(rs_data_text_parse(buf, TEXT_BYTES, "big.txt", 32, &d, &e) == RS_OK, "parse: %s", e.msg);
    free(buf);
    if (!d.train) return rs_test_finish("engine-text-mem");
    char spec[160];
    snprintf(spec, sizeof spec, "gpt layers=1 heads=2 dim=16 ctx=32 vocab=%d", d.train->n_classes);
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse(spec, "g", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s: %s", spec, e.msg);
    if (m) {
        rs_train_cfg c = rs_train_defaults();
        c.batch = 8;
        c.max_steps = 2;
        c.eval = false;
        c.threads = 1;
        rs_train_result res;
        RS_CHECK(rs_train(m, &d, &c, NULL, &res, &e) == RS_OK, "train: %s", e.msg);
        RS_CHECK(res.steps == 2, "%lld steps", (long long)res.steps);
    }
    long long after = vm_hwm(), grew = after - before;
    /* the tokens (one byte a character) and 24 MB for the model, batch and libraries' buffers */
    long long bound = (long long)TEXT_BYTES + (24ll << 20);
    printf("  text %u bytes: peak memory grew %.1f MB (bound %.1f MB; an index list of every window would "
           "add %.1f MB)\n",
           TEXT_BYTES, grew / 1048576.0, bound / 1048576.0, 8.0 * d.train->n / 1048576.0);
    RS_CHECK(grew <= bound, "peak memory grew by %lld bytes for a %u-byte text, bound %lld", grew, TEXT_BYTES, bound);

    /* the windows are drawn over the whole text: 64 draws reach past its first half */
    rs_sampler_cfg sc = rs_sampler_cfg_default();
    sc.draw = true;
    sc.seed = 5;
    rs_sampler *s = rs_sampler_new(d.train->n, &sc, &e);
    RS_CHECK(s != NULL, "sampler: %s", e.msg);
    uint32_t hi = 0;
    for (uint32_t i = 0; s && i < 64; i++)
        if (rs_sampler_index(s, i) > hi) hi = rs_sampler_index(s, i);
    RS_CHECK(hi > d.train->n / 2 && hi < d.train->n, "largest of 64 drawn windows %u of %u", hi, d.train->n);
    rs_sampler_free(s);
    rs_model_free(m);
    rs_data_pair_clear(&d);
    return rs_test_finish("engine-text-mem");
}
