// File: tools/matrix-report/src/internal/city_hash.h
//
// CityHash64 as ClickHouse's cityHash64() computes it for one String: Google's
// CityHash v1.0.2 (the version ClickHouse bundles; later CityHash versions
// give other values). Push places rows on the shards of a cluster with it,
// as the Distributed table `issues` does with its sharding key
// cityHash64(host_id) (docs/fleet.md, "Two shards"): a row must land where the
// Distributed table would put it, byte for byte, or a push again of the same
// issue would store it on a second shard. Internal to matrix_report_lib.
//
//   uint64_t hash = internal::CityHash64("host-0042");
//
// Thread safety: a pure function; any thread.

#ifndef MATRIX_REPORT_SRC_INTERNAL_CITY_HASH_H_
#define MATRIX_REPORT_SRC_INTERNAL_CITY_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace matrix::report::internal {

// CityHash v1.0.2's CityHash64 of `text`'s bytes (little-endian reads, as
// on x86-64 and ARM64): what `SELECT cityHash64(text)` answers.
uint64_t CityHash64(absl::string_view text);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_CITY_HASH_H_
