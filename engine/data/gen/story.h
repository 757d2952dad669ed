/* story: the built-in text corpus, short tales of a village written by a seeded grammar the project
 * defines itself (no copied prose), so `data t = text` trains a character model with nothing installed.
 * It is built for a small model to learn quickly and visibly: a vocabulary of a few dozen characters,
 * words from short lists, sentences from a dozen forms, and dependencies a context can carry (a question
 * names a thing and its answer repeats it; a count goes up by one; a tale keeps its two characters). */
#ifndef RS_STORY_H
#define RS_STORY_H

#include <stddef.h>
#include <stdint.h>

/* The seed and length `data t = text` uses: about 200 KB. */
#define RS_DATA_STORY_SEED 1u
#define RS_DATA_STORY_BYTES ((size_t)200000)

/* Tales from seed until at least min_bytes are written (it stops at the end of a tale), NUL-terminated;
 * *len gets the length without the NUL. A pure function of (seed, min_bytes): the same bytes on every
 * machine. Caller owns the result (free()); NULL when out of memory. */
char *rs_data_story(uint64_t seed, size_t min_bytes, size_t *len);

#endif
