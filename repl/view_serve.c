/* `view serve`: the dashboard's serve pane over the server started at the prompt, redrawn from a fresh
 * summary (the statistics `serve` prints) a few times a second until a key is pressed. The server
 * runs on its own threads meanwhile, so watching it while clients (another terminal, tritonclient,
 * perf_analyzer) send requests shows the batcher at work. Without a terminal: one frame as text. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "call.h"
#include "dist/pg/pg.h"
#include "serve/summary.h"
#include "session.h"
#include "view/serve_pane.h"
#include "view/view_curses.h"
#include "view_live.h"

int rs_cmd_view_serve(rs_session *s, const rs_call *c);

/* rs_live's frame: one snapshot, drawn and dropped. */
static void draw(void *ud, rs_view_screen *sc, const rs_view_opts *o)
{
    rs_session *s = ud;
    rs_serve_summary sum;
    rs_err err = {0};
    /* a snapshot cut short by a failed allocation still holds the versions it got: draw those */
    rs_serve_summary_take(s->server, rs_serve_now_ns(), &sum, &err);
    rs_view_draw_serve_frame(sc, &sum, o);
    rs_serve_summary_clear(&sum);
}

int rs_cmd_view_serve(rs_session *s, const rs_call *c)
{
    if (c->nargs > 1)
        return rs_session_error(s, c, c->arg_pos[1], 0, "view serve: takes no run number (view run N replays a run)");
    if (!s->server)
        return rs_session_error(s, c, c->arg_pos[0], 5, "view serve: nothing is served; start a server first: "
                                "serve MODEL (or serve FILE.onnx, serve REPOSITORY), then view serve");
    rs_view_run run = {.id = "", .kind = "serve", .world = 1, .t_start = -1};
    rs_live *lv = rs_live_start(s, &run);
    if (!lv) {
        int w, h;
        rs_live_frame_size(s, &w, &h);
        rs_err e = {0};
        rs_view_screen *sc = rs_view_screen_new(w, h, &e);
        const char *text = NULL;
        if (sc) {
            rs_view_opts o = rs_view_opts_detect(getenv("TERM"), getenv("NO_COLOR"), rs_view_locale_utf8());
            draw(s, sc, &o);
            text = rs_view_screen_text(sc);
        }
        if (text) fputs(text, s->out);
        rs_view_screen_free(sc);
        return text ? 0 : rs_session_error(s, c, (size_t)-1, 0, "view serve: out of memory");
    }
    rs_live_set_speed(lv, 4, false); /* the rate is counted per second; 4 frames a second follow it */
    rs_live_set_draw(lv, draw, s);
    /* a tutorial played in auto mode goes on by itself, as it does after a run's last frame */
    bool autoplay = s->play_depth && s->play_mode == RS_PLAY_AUTO;
    rs_live_status(lv, autoplay ? "live: 3 s, or a key" : "live: any key leaves");
    double until = rs_pg_now() + 3;
    while (!(rs_live_tick(lv) & (RS_LIVE_KEY | RS_LIVE_STOP)) && !(autoplay && rs_pg_now() > until)) usleep(20000);
    rs_live_end(lv);
    return 0;
}
