/* A protobuf message from its JSON form (grpc_json.h), by the message's descriptor: how the gRPC
 * ModelConfig is built from the JSON the HTTP front end answers, so the two protocols state one set of
 * config facts, written once (http_json.c). */
#include "grpc_json.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv {
    char *msg;
    size_t n;
} conv;

static bool fail(conv *cv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cv->msg, cv->n, fmt, ap);
    va_end(ap);
    return false;
}

static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    default: return 4;
    }
}

static bool message_from(const json_t *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out, conv *cv);

/* A map field's entry (a message of key and value) from one JSON member. */
static bool entry_from(const char *key, const json_t *v, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out,
                       conv *cv)
{
    json_t *e = json_pack("{s:s,s:O}", "key", key, "value", v); /* owned here */
    bool ok = e && message_from(e, d, out, cv);
    json_decref(e);
    return ok || (e ? false : fail(cv, "out of memory"));
}

/* One value of field f at p. */
static bool value_from(const json_t *v, const ProtobufCFieldDescriptor *f, void *p, conv *cv)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) return fail(cv, "'%s': not a boolean", f->name);
        *(protobuf_c_boolean *)p = json_is_true(v);
        return true;
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE:
        if (!json_is_number(v)) return fail(cv, "'%s': not a number", f->name);
        if (f->type == PROTOBUF_C_TYPE_FLOAT) *(float *)p = (float)json_number_value(v);
        else *(double *)p = json_number_value(v);
        return true;
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v)) return fail(cv, "'%s': not a string", f->name);
        return (*(char **)p = strdup(json_string_value(v))) ? true : fail(cv, "out of memory");
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *e = json_is_string(v)
            ? protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v)) : NULL;
        if (!e) return fail(cv, "'%s': not a value of %s", f->name, ((const ProtobufCEnumDescriptor *)f->descriptor)->name);
        *(int *)p = e->value;
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return message_from(v, f->descriptor, (ProtobufCMessage **)p, cv);
    case PROTOBUF_C_TYPE_BYTES:
        return fail(cv, "'%s': bytes fields are not read from JSON here", f->name);
    default: { /* the integers: JSON integers, or strings as protobuf's JSON writes 64-bit ones */
        long long x = 0;
        char *end = NULL;
        bool ok = json_is_integer(v);
        if (ok) x = (long long)json_integer_value(v);
        if (json_is_string(v)) {
            x = strtoll(json_string_value(v), &end, 10);
            ok = !*end && end != json_string_value(v);
        }
        if (!ok) return fail(cv, "'%s': not an integer", f->name);
        if (elem_size(f->type) == 8) *(int64_t *)p = (int64_t)x;
        else *(int32_t *)p = (int32_t)x;
        return true;
    }
    }
}

static bool is_map(const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *d = f->descriptor;
    size_t n = f->type == PROTOBUF_C_TYPE_MESSAGE ? strlen(d->short_name) : 0;
    return f->label == PROTOBUF_C_LABEL_REPEATED && n > 5 && !strcmp(d->short_name + n - 5, "Entry");
}

/* A repeated field from a JSON array (or, for a map, an object). */
static bool repeated_from(const json_t *v, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m, conv *cv)
{
    size_t cnt = json_is_array(v) ? json_array_size(v) : json_is_object(v) && is_map(f) ? json_object_size(v) : (size_t)-1;
    if (cnt == (size_t)-1) return fail(cv, "'%s': not an array", f->name);
    size_t es = elem_size(f->type);
    char *arr = cnt ? calloc(cnt, es) : NULL; /* the message's: protobuf_c_message_free_unpacked */
    if (cnt && !arr) return fail(cv, "out of memory");
    *(void **)((char *)m + f->offset) = arr;
    size_t *n = (size_t *)((char *)m + f->quantifier_offset);
    if (json_is_array(v)) {
        for (*n = 0; *n < cnt; (*n)++)
            if (!value_from(json_array_get(v, *n), f, arr + *n * es, cv)) return false;
        return true;
    }
    const char *key;
    const json_t *e;
    *n = 0;
    json_object_foreach((json_t *)v, key, e) {
        if (!entry_from(key, e, f->descriptor, (ProtobufCMessage **)(arr + *n * es), cv)) return false;
        (*n)++;
    }
    return true;
}

static bool message_from(const json_t *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out, conv *cv)
{
    if (!json_is_object(j)) return fail(cv, "%s: not an object", d->short_name);
    ProtobufCMessage *m = calloc(1, d->sizeof_message); /* the caller's: protobuf_c_message_free_unpacked */
    if (!m) return fail(cv, "out of memory");
    d->message_init(m);
    *out = m;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
        if (!f) return fail(cv, "%s has no field '%s'", d->name, key); /* never dropped silently */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!repeated_from(v, f, m, cv)) return false;
            continue;
        }
        /* a oneof's case first: what free_unpacked reads to free the member on a later failure */
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
        else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
            *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
        if (!value_from(v, f, (char *)m + f->offset, cv)) return false;
    }
    return true;
}

ProtobufCMessage *rs_grpc_from_json(const json_t *j, const ProtobufCMessageDescriptor *d, char *msg, size_t n)
{
    conv cv = {msg, n};
    ProtobufCMessage *m = NULL;
    if (message_from(j, d, &m, &cv)) return m;
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    return NULL;
}
