/* Status codes and error messages for the whole engine.
 * Library functions return an rs_status and, when they fail, fill an rs_err with a message that names
 * the problem and what would work; only main() decides to exit. */
#ifndef RS_STATUS_H
#define RS_STATUS_H

#include <stddef.h>

typedef enum rs_status {
    RS_OK = 0,
    RS_ERR_ARG,         /* a caller passed a value that cannot work (bad option, bad layer spec) */
    RS_ERR_IO,          /* open/read/write failed; the message carries the path and errno text */
    RS_ERR_FORMAT,      /* a file's bytes are not what its format says; message has file and offset */
    RS_ERR_NOMEM,
    RS_ERR_SHAPE,       /* tensor shapes do not fit together */
    RS_ERR_UNSUPPORTED, /* valid request this build or device cannot do */
    RS_ERR_CANCELLED,   /* the abort callback asked to stop */
    RS_ERR_TIMEOUT,
    RS_ERR_INTERNAL,
} rs_status;

#define RS_ERR_MSG_MAX 512

typedef struct rs_err {
    rs_status code;
    char msg[RS_ERR_MSG_MAX];
} rs_err;

/* Records code and a printf-style message in *e (e may be NULL) and returns code, so that a failure
 * reads `return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));`. */
rs_status rs_err_set(rs_err *e, rs_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "context: " to an existing message, for callers that add where the error happened. */
rs_status rs_err_prefix(rs_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void rs_err_clear(rs_err *e);
const char *rs_status_name(rs_status s);

#endif
