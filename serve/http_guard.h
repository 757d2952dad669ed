/* Guards a libmicrohttpd daemon against clients that hold connections without finishing requests:
 * admission by the server's limits (connections in all and per client address, refused at accept),
 * and a deadline per request (headers and body) that a trickle of bytes does not extend, enforced by
 * a watcher thread that shuts such a connection's socket down. MHD's own connection timeout only
 * counts silence, which one byte every few seconds resets. */
#ifndef RS_SERVE_HTTP_GUARD_H
#define RS_SERVE_HTTP_GUARD_H

#include <microhttpd.h>

#include "server.h"

typedef struct rs_serve_http_guard rs_serve_http_guard;

/* Counts its refusals in s's counters under front end fe. Caller owns *out. */
rs_status rs_serve_http_guard_new(rs_serve_server *s, rs_serve_frontend fe, rs_serve_http_guard **out, rs_err *err);
/* After the daemon has stopped (no callback runs any more). NULL is a no-op. */
void rs_serve_http_guard_free(rs_serve_http_guard *g);

/* MHD_OPTION_... callbacks, with the guard as their closure. */
enum MHD_Result rs_serve_http_guard_accept(void *g, const struct sockaddr *addr, socklen_t len);
void rs_serve_http_guard_notify(void *g, struct MHD_Connection *c, void **sctx, enum MHD_ConnectionNotificationCode toe);

/* From the request handler: the request on c has arrived whole (busy: no deadline while it is
 * answered), or its answer is done (the next request's deadline starts). */
void rs_serve_http_guard_busy(struct MHD_Connection *c, bool busy);

#endif
