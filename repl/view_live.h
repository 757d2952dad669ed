/* The live dashboard in the REPL: owns the terminal (curses) while ranks run or a logged run is replayed,
 * feeds the ranks' lines into a repl/view model and draws at most one frame per tick. The panes
 * themselves live in repl/view and know nothing of terminals; this file adds the keyboard, SIGWINCH and
 * the capture of what the REPL prints meanwhile (shown in the log pane, then printed after the view). */
#ifndef RS_VIEW_LIVE_H
#define RS_VIEW_LIVE_H

#include <stdbool.h>

#include "session.h"
#include "view/model.h"
#include "view/render.h"

typedef struct rs_live rs_live;

/* What rs_live_tick saw; a bit mask. RS_LIVE_STOP is 1 so `if (rs_live_tick(lv) & RS_LIVE_STOP)` reads as
 * "the user asked to stop the run" (Ctrl-C arrives as SIGINT in the session's flag, as without the view). */
enum {
    RS_LIVE_STOP = 1,  /* Ctrl-C: stop the run */
    RS_LIVE_QUIT = 2,  /* q: leave the view; the run goes on with plain lines */
    RS_LIVE_NEXT = 4,  /* n, Enter or Right (focus not on the log): the next algorithm step (step=1) */
    RS_LIVE_BACK = 8,  /* Left: scrub back (replays) */
    RS_LIVE_FWD = 16,  /* Right: scrub forward (replays) */
    RS_LIVE_KEY = 32,  /* any key at all (a resize is none) */
};

/* Whether a live view can run for this session: a person at a terminal (s->interactive), stdout a
 * terminal and TERM set and not "dumb". */
bool rs_live_possible(const rs_session *s);

/* Takes the terminal and draws an empty dashboard for run (strings copied). While the view is up,
 * s->out is redirected to a buffer: its lines go to the log pane and the whole text is printed to the
 * real output by rs_live_end. Returns NULL (and prints nothing) when the view cannot start; the caller
 * then prints plain lines as before. The caller owns the result and must call rs_live_end. */
rs_live *rs_live_start(rs_session *s, const rs_view_run *run);
/* One line a rank wrote (any kind: '@' lines are parsed by the model). */
void rs_live_line(rs_live *lv, int rank, const char *line);
/* Keys, resize and at most one frame (a single doupdate); call every ~20 ms. Returns RS_LIVE_* bits. */
int rs_live_tick(rs_live *lv);
/* Gives the terminal back (endwin), restores s->out and prints what the REPL wrote meanwhile.
 * NULL is a no-op. */
void rs_live_end(rs_live *lv);

/* Replays: the model to feed directly, and the clock the frames are drawn at (< 0: the monotonic clock,
 * the default for live runs). */
rs_view_model *rs_live_model(rs_live *lv);
void rs_live_set_now(rs_live *lv, double now);
/* Display speed: frames per second for live runs, the playback factor for replays (`+`/`-` halve or
 * double it). */
double rs_live_speed(const rs_live *lv);
void rs_live_set_speed(rs_live *lv, double speed, bool replay);
bool rs_live_paused(const rs_live *lv);
/* A status word for the header's corner ("paused", "replay 2x", "step: press n"), copied; NULL clears. */
void rs_live_status(rs_live *lv, const char *text);
/* Between rs_live_quiet(lv, true) and rs_live_quiet(lv, false), what the REPL prints is kept for the end
 * (printed when the view closes) but left out of the log pane: text the panes show their own way (the
 * bench table). */
void rs_live_quiet(rs_live *lv, bool on);
/* A frame the caller draws instead of the run's panes (`view serve`): fn(ud, screen, options) fills the
 * terminal-sized screen on every frame; the status corner is added after it. NULL: the panes again. */
typedef void (*rs_live_draw_fn)(void *ud, rs_view_screen *s, const rs_view_opts *o);
void rs_live_set_draw(rs_live *lv, rs_live_draw_fn fn, void *ud);
/* Draws the next tick even when paused or within the frame interval. */
void rs_live_dirty(rs_live *lv);

/* The final frame as text, w x h, without a terminal: what `view run N` prints headless and what
 * RINGSIDE_VIEW_DUMP writes. The buffer is malloc'ed (caller frees); NULL when out of memory. */
char *rs_live_frame_text(const rs_view_model *vm, int w, int h);
/* The size of that frame: as wide as s's output (80 in scripts and pipes, never less), 30 rows. */
void rs_live_frame_size(const rs_session *s, int *w, int *h);

#endif
