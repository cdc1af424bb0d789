// File: matrix/core/interned_string.h
//
// InternString() keeps one copy of each distinct string for the life of the
// process and returns a reference to it. Threads that watch the looper thread
// (the watchdog, dumps) may keep such a reference and read it at any time,
// also after the object that named it is gone, so names are interned once, off
// the hot path, instead of being copied per message.
//
//   const std::string& name = matrix::InternString("matrix::Handler");
//   // &name is the same for every call with the same text.
//
// Thread safety: thread-safe. Never frees: intern names, not data.

#ifndef MATRIX_CORE_INTERNED_STRING_H_
#define MATRIX_CORE_INTERNED_STRING_H_

#include <string>
#include <string_view>

namespace matrix {

const std::string& InternString(std::string_view text);

}  // namespace matrix

#endif  // MATRIX_CORE_INTERNED_STRING_H_
