/* The guard device's memory (private to engine/guard): one reserved range of address space, page
 * blocks handed out first-fit, and the seal every kernel call lifts while it runs. guard.h says what
 * the device is for. */
#ifndef RS_GUARD_ARENA_H
#define RS_GUARD_ARENA_H

#include <stdbool.h>
#include <stddef.h>

/* A zero-filled block of `bytes` (0 gets a page of its own), page-aligned; NULL with the reason in
 * *why (a static string) when the arena cannot be reserved or is full. */
void *rs_guard_block_alloc(size_t bytes, const char **why);
/* Gives back a block of rs_guard_block_alloc. 0; -1 when p does not start a live block; -2 when the
 * block was allocated with another size (then *was is that size). */
int rs_guard_block_free(void *p, size_t bytes, size_t *was);

/* [p, p + bytes) lies inside the part of the arena handed out so far (device memory; a pointer just
 * past the last block counts, for empty ranges). */
bool rs_guard_owns(const void *p, size_t bytes);
/* p lies anywhere in the reserved arena (so it is not host memory). */
bool rs_guard_in_arena(const void *p);

/* Around every kernel call: the first caller in opens the handed-out range for reading and writing,
 * the last one out seals it again (PROT_NONE). Nesting and threads are counted process-wide. */
void rs_guard_enter(void);
void rs_guard_leave(void);

#endif
