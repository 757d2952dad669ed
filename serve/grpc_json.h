/* A protobuf-c message built from the JSON form of the same message (protobuf's JSON mapping: field
 * names as in the .proto, enums by name, maps as objects, 64-bit integers as numbers or strings), by
 * its descriptor alone: the gRPC ModelConfig is the HTTP config's JSON converted, so both front ends
 * answer the same facts. A JSON member the message has no field for is an error, never dropped. */
#ifndef RS_SERVE_GRPC_JSON_H
#define RS_SERVE_GRPC_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* The message of type d that j states, every part malloc'd (the caller frees it with
 * protobuf_c_message_free_unpacked(m, NULL)); NULL with msg (n bytes) set when j does not fit d. */
ProtobufCMessage *rs_grpc_from_json(const json_t *j, const ProtobufCMessageDescriptor *d, char *msg, size_t n);

#endif
