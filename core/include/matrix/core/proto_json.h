// File: matrix/core/proto_json.h
//
// ProtoToJson prints a protobuf message as one line of JSON, byte for byte
// what protobuf's util::MessageToJsonString prints with the proto field
// names and every primitive field at its default printed
// (preserve_proto_field_names, always_print_primitive_fields): the form of
// matrix's reports (Issue::ToJson).
//
//   const std::string line = matrix::ProtoToJson(issue.proto());
//
// matrix's report messages (matrix.proto.Issue and every message it holds)
// are printed from their serialized bytes with a table of their fields
// written at build time (core/tools/json_schema_gen.cc). protobuf's printer
// re-serializes the message and builds a google.protobuf.Type for every
// message type it meets, and reflection would build the descriptors: in a
// monitored program those touch about 1.1 MB of libprotobuf's pages and heap
// (docs/performance.md, matrix-run agent). Other messages, and any a future
// field kind the table does not cover (maps, bytes, floats, packed repeated
// numbers, `optional`), go to protobuf's printer.
//
// Thread safety: thread-safe (reads the message only).

#ifndef MATRIX_CORE_PROTO_JSON_H_
#define MATRIX_CORE_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace matrix {

// `message` as one line of JSON (see above); "{}" if protobuf's printer,
// when used, fails. Allocates; not for the looper thread's hot path.
std::string ProtoToJson(const google::protobuf::Message& message);

}  // namespace matrix

#endif  // MATRIX_CORE_PROTO_JSON_H_
