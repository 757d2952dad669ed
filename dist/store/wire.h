/* The store's wire protocol, shared by the server, the client and the fuzz target. Internal to
 * dist/store: callers of the store use store.h. The format is described at the top of wire.c. */
#ifndef RS_DIST_STORE_WIRE_H
#define RS_DIST_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

enum {
    RS_STORE_KEY_MAX = 4096,           /* bytes in a key */
    RS_STORE_VAL_MAX = 64 << 20,       /* bytes in a value (and in a reply's payload) */
    RS_STORE_WAIT_KEYS_MAX = 65536,    /* keys in one WAIT */
    RS_STORE_REQ_HEAD = 1 + 4 + 8,     /* op, key length, value length */
    RS_STORE_REPLY_HEAD = 1 + 8,       /* status, payload length */
};

typedef enum rs_store_op {
    RS_STORE_OP_SET = 1,   /* key, value */
    RS_STORE_OP_GET = 2,   /* key, value = u32 timeout_ms */
    RS_STORE_OP_ADD = 3,   /* key, value = i64 delta */
    RS_STORE_OP_CHECK = 4, /* key, no value */
    RS_STORE_OP_WAIT = 5,  /* no key, value = u32 timeout_ms, u32 nkeys, nkeys x (u32 len, bytes) */
} rs_store_op;

typedef enum rs_store_reply {
    RS_STORE_REPLY_OK = 0,      /* GET: the value; ADD: i64 result; CHECK: key exists */
    RS_STORE_REPLY_ABSENT = 1,  /* CHECK: key not set */
    RS_STORE_REPLY_TIMEOUT = 2, /* GET/WAIT: payload = the missing keys, packed as in WAIT's list */
    RS_STORE_REPLY_BAD = 3,     /* malformed value for the op (e.g. ADD on a non-integer) */
} rs_store_reply;

/* One decoded request; the pointers borrow from the buffer given to rs_store_wire_parse. */
typedef struct rs_store_req {
    rs_store_op op;
    const uint8_t *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
    uint32_t timeout_ms; /* GET, WAIT */
    int64_t delta;       /* ADD */
    const uint8_t *keys; /* WAIT: the packed key list, walk it with rs_store_wire_next_key */
    uint32_t nkeys;
} rs_store_req;

/* Decodes the request at the start of buf[0..n). Returns 1 and sets *used when a whole valid request
 * is there, 0 when more bytes are needed (*used = bytes needed in all, when the header tells; else 0),
 * -1 when the bytes can never be a valid request (the server then drops the peer). */
int rs_store_wire_parse(const uint8_t *buf, size_t n, rs_store_req *req, size_t *used);

/* Reads one (u32 len, bytes) entry of a packed key list already validated by the parser; returns a
 * pointer past it. */
const uint8_t *rs_store_wire_next_key(const uint8_t *p, const uint8_t **key, size_t *klen);

static inline void rs_store_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}
static inline void rs_store_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
}
static inline uint32_t rs_store_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t rs_store_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

#endif
