/* The guard device: a test device that proves the engine reaches device memory only through its kernel
 * table. Its table (engine/guard/guard_table.c) runs the CPU's kernels, but on memory that is sealed
 * (PROT_NONE) whenever none of its entries is running, so host code that reads or writes a block
 * directly (as it must never do with a GPU's memory) dies at once with SIGSEGV at the faulting
 * access (under ASan with its stack). Its compute entries also refuse an array argument that is host
 * memory (a kernel on a GPU would fault on it), and its copies check which side is the device's. A
 * model placed on `guard` therefore behaves as on a GPU as far as where memory may be read, and
 * computes exactly what it would compute on the CPU.
 *
 * The seal is process-wide state (one arena, one count of running calls, one mutex): acceptable only
 * because this is a test device; no real device table may keep such state. RINGSIDE_GUARD=off (read
 * once, at the first allocation) leaves the memory open, for debugging; the argument checks stay. */
#ifndef RS_GUARD_H
#define RS_GUARD_H

#include <stdbool.h>

/* The guard table, rs_guard_kernels (kind RS_DEV_GUARD, name "guard"), is declared with the other
 * tables in kernels.h, where rs_kernels_for registers it. */
#include "engine/core/kernels.h"

/* Whether the guard's memory is sealed between calls (false with RINGSIDE_GUARD=off). Reserves the
 * arena if no block was allocated yet. */
bool rs_guard_sealing(void);

#endif
