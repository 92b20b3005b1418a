// The extension's own SQLSTATE class IK (implementation-defined), raised by src/records.cpp and
// src/leased_queue.cpp; docs/sqlstates.md lists them with every other code the extension raises.
#pragma once

#include "pg_cpp.hpp"

namespace idem::pg {

inline constexpr int IK_NOT_FOUND = MAKE_SQLSTATE('I', 'K', '0', '0', '1'); // unknown key/event
inline constexpr int IK_FENCED = MAKE_SQLSTATE('I', 'K', '0', '0', '2');    // stale attempt
inline constexpr int IK_FINISHED = MAKE_SQLSTATE('I', 'K', '0', '0', '3');  // already finished

} // namespace idem::pg
