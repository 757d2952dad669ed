/* The REPL's side of the session log: commands and runs recorded through repl/slog, with a session
 * that has no log (--no-db, or a log that could not be opened) doing nothing. A write failure is
 * reported once as a warning and never stops the command. */
#ifndef RS_REPL_LOG_H
#define RS_REPL_LOG_H

#include "session.h"
#include "slog/slog.h"

/* Starts a run of the current command; options_json is built from the call's options (given and
 * defaults). Returns the run id, 0 when there is no log. */
int64_t rs_log_run_begin(rs_session *s, const char *kind, const char *model, const char *spec, const char *data,
                         const rs_call *c);
/* The same for a run across ranks: mode ("collective", "ddp"...), backend, world size. */
int64_t rs_log_run_begin_dist(rs_session *s, const char *kind, const char *model, const char *spec, const char *data,
                              const rs_call *c, const char *mode, const char *backend, int world);
/* An event a rank reported (see rs_slog_event). */
void rs_log_event(rs_session *s, int64_t run, const rs_slog_event_info *ev);
void rs_log_metric(rs_session *s, int64_t run, int64_t step, int epoch, const char *name, double value);
void rs_log_run_end(rs_session *s, int64_t run, const char *status, int64_t steps, const char *final_json,
                    const char *error);
void rs_log_artifact(rs_session *s, const char *path, const char *kind);
void rs_log_artifact_run(rs_session *s, int64_t run, const char *path, const char *kind);
int rs_log_show_run(rs_session *s, const rs_call *c, int64_t run);
/* Reports a log write failure once per session. */
void rs_log_check(rs_session *s);

#endif
