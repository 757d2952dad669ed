/* The rendezvous store: a small key-value server over TCP that ranks use to find each other, as
 * c10d's TCPStore does. One process (the launcher or rank 0) hosts the server in a thread; every rank
 * connects a client. Blocking gets and waits are answered by the server when the key appears. */
#ifndef RS_DIST_STORE_H
#define RS_DIST_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"

typedef struct rs_store_server rs_store_server;
typedef struct rs_store rs_store;

/* Starts a server listening on host:port (port 0 lets the system pick a free one; read it back with
 * rs_store_server_port) and serving from its own thread. A port in use is an RS_ERR_IO at once.
 * The caller owns *out and ends it with rs_store_server_stop. */
rs_status rs_store_server_start(const char *host, int port, rs_store_server **out, rs_err *err);
int rs_store_server_port(const rs_store_server *s);
/* Closes every client connection (their pending gets and waits fail with a clear error), joins the
 * thread and frees everything. NULL is a no-op. */
void rs_store_server_stop(rs_store_server *s);

/* Connects to host:port, retrying until timeout_s (the server may start later). The caller owns *out
 * and ends it with rs_store_close. */
rs_status rs_store_connect(const char *host, int port, double timeout_s, rs_store **out, rs_err *err);
void rs_store_close(rs_store *st);
/* The connection's socket, for a watcher that polls it for the server's end (POLLRDHUP); -1 for NULL.
 * The client still owns it: never read, write or close it. */
int rs_store_fd(const rs_store *st);
/* The local IPv4 address of this client's connection (dotted text into host, cap bytes): the interface
 * that reaches the store's host, so the one a backend should listen on for ranks on other hosts. */
rs_status rs_store_local_addr(rs_store *st, char *host, size_t cap, rs_err *err);

/* Keys are non-empty, at most RS_STORE_KEY_MAX bytes; values at most RS_STORE_VAL_MAX bytes. */
rs_status rs_store_set(rs_store *st, const char *key, const void *val, size_t n, rs_err *err);
/* Blocks until key exists or timeout_s passes (RS_ERR_TIMEOUT). *val is malloc'd (caller frees; one
 * extra zero byte follows the value, so text values read as C strings). */
rs_status rs_store_get(rs_store *st, const char *key, void **val, size_t *n, double timeout_s, rs_err *err);
/* Atomically adds delta to the integer counter at key (missing = 0); *result gets the new value.
 * A counter is stored as its decimal text, so rs_store_get reads it too. */
rs_status rs_store_add(rs_store *st, const char *key, int64_t delta, int64_t *result, rs_err *err);
/* Non-blocking: *exists = 1 when key is set. */
rs_status rs_store_check(rs_store *st, const char *key, int *exists, rs_err *err);
/* Blocks until every key exists; on timeout the message names the keys still missing. */
rs_status rs_store_wait(rs_store *st, const char *const *keys, int nkeys, double timeout_s, rs_err *err);

/* Every rank sets "rank/<rank>" to "world=<world>", then waits for all world ranks; on timeout the
 * message names the ranks that never arrived. Ranks that arrived with another world size (by hand,
 * WORLD_SIZE set differently) make it RS_ERR_ARG, "the world sizes differ", naming both. */
rs_status rs_store_rendezvous(rs_store *st, int rank, int world, double timeout_s, rs_err *err);
/* A reusable barrier: a counter "barrier/<name>/count" whose generation (count-1)/world tells each
 * call which release key "barrier/<name>/gen/<g>" to wait for; the last arrival sets it. */
rs_status rs_store_barrier(rs_store *st, const char *name, int world, double timeout_s, rs_err *err);

#endif
