/* Decoder for the store's wire protocol: the one place where bytes from a peer become a request, so
 * every length is checked here against the limits before anything is allocated or indexed.
 *
 * All integers are big-endian.
 *   request = op:u8 | klen:u32 | key:klen bytes | vlen:u64 | value:vlen bytes
 *     SET   key, value = the bytes to store
 *     GET   key, value = timeout_ms:u32              (answered when the key exists or at the timeout)
 *     ADD   key, value = delta:i64                   (counter kept as decimal text)
 *     CHECK key, no value
 *     WAIT  no key, value = timeout_ms:u32 | nkeys:u32 | nkeys x (len:u32 | bytes)
 *   reply   = status:u8 | plen:u64 | payload:plen bytes
 *     OK      GET: value; ADD: result:i64; others: empty
 *     ABSENT  CHECK on a missing key
 *     TIMEOUT GET/WAIT: the keys still missing, packed as nkeys:u32 | nkeys x (len:u32 | bytes)
 *     BAD     the request is well formed but cannot apply (ADD to a value that is not an integer)
 * Limits: keys 1..4096 bytes, values <= 64 MiB, <= 65536 keys per WAIT. A request that breaks them,
 * or an unknown op, is malformed: the server disconnects that peer and goes on serving the others. */
#include "dist/store/wire.h"

static int valid_key_len(uint64_t k) { return k >= 1 && k <= RS_STORE_KEY_MAX; }

int rs_store_wire_parse(const uint8_t *buf, size_t n, rs_store_req *req, size_t *used)
{
    *used = 0;
    if (n < 5) return 0;
    uint8_t op = buf[0];
    if (op < RS_STORE_OP_SET || op > RS_STORE_OP_WAIT) return -1;
    uint32_t klen = rs_store_get_u32(buf + 1);
    if (op == RS_STORE_OP_WAIT ? klen != 0 : !valid_key_len(klen)) return -1;
    size_t vpos = 5 + (size_t)klen + 8;
    if (n < vpos) return 0;
    uint64_t vlen = rs_store_get_u64(buf + 5 + klen);
    if (vlen > RS_STORE_VAL_MAX) return -1;
    switch (op) {
    case RS_STORE_OP_GET: if (vlen != 4) return -1; break;
    case RS_STORE_OP_ADD: if (vlen != 8) return -1; break;
    case RS_STORE_OP_CHECK: if (vlen != 0) return -1; break;
    case RS_STORE_OP_WAIT: if (vlen < 8) return -1; break;
    default: break;
    }
    size_t total = vpos + (size_t)vlen;
    *used = total;
    if (n < total) return 0;

    *req = (rs_store_req){.op = (rs_store_op)op, .key = buf + 5, .klen = klen, .val = buf + vpos,
                          .vlen = (size_t)vlen};
    if (op == RS_STORE_OP_GET) req->timeout_ms = rs_store_get_u32(req->val);
    if (op == RS_STORE_OP_ADD) req->delta = (int64_t)rs_store_get_u64(req->val);
    if (op == RS_STORE_OP_WAIT) {
        req->timeout_ms = rs_store_get_u32(req->val);
        req->nkeys = rs_store_get_u32(req->val + 4);
        if (req->nkeys < 1 || req->nkeys > RS_STORE_WAIT_KEYS_MAX) return -1;
        req->keys = req->val + 8;
        /* Walk the list once here so the server may trust it afterwards. */
        size_t pos = 8;
        for (uint32_t i = 0; i < req->nkeys; i++) {
            if (req->vlen - pos < 4) return -1;
            uint32_t l = rs_store_get_u32(req->val + pos);
            if (!valid_key_len(l) || req->vlen - pos - 4 < l) return -1;
            pos += 4 + (size_t)l;
        }
        if (pos != req->vlen) return -1;
    }
    return 1;
}

const uint8_t *rs_store_wire_next_key(const uint8_t *p, const uint8_t **key, size_t *klen)
{
    *klen = rs_store_get_u32(p);
    *key = p + 4;
    return p + 4 + *klen;
}
