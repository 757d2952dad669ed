/* Error message helpers (see status.h). */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

rs_status rs_err_set(rs_err *e, rs_status code, const char *fmt, ...)
{
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

rs_status rs_err_prefix(rs_err *e, const char *fmt, ...)
{
    if (!e) return RS_ERR_INTERNAL;
    /* Room for both parts in full; the result is cut to the message size afterwards. */
    char head[RS_ERR_MSG_MAX], joined[2 * RS_ERR_MSG_MAX + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    snprintf(joined, sizeof joined, "%s: %s", head, e->msg);
    memcpy(e->msg, joined, sizeof e->msg - 1);
    e->msg[sizeof e->msg - 1] = '\0';
    return e->code;
}

void rs_err_clear(rs_err *e)
{
    if (!e) return;
    e->code = RS_OK;
    e->msg[0] = '\0';
}

const char *rs_status_name(rs_status s)
{
    switch (s) {
    case RS_OK: return "ok";
    case RS_ERR_ARG: return "bad argument";
    case RS_ERR_IO: return "i/o error";
    case RS_ERR_FORMAT: return "bad format";
    case RS_ERR_NOMEM: return "out of memory";
    case RS_ERR_SHAPE: return "shape mismatch";
    case RS_ERR_UNSUPPORTED: return "unsupported";
    case RS_ERR_CANCELLED: return "cancelled";
    case RS_ERR_TIMEOUT: return "timeout";
    case RS_ERR_INTERNAL: return "internal error";
    }
    return "unknown";
}
