// What other files ask of src/key_header.cpp.
#pragma once

#include "pg_cpp.hpp"

namespace idem::pg::key_header {

// The key an Idempotency-Key header value carries, as a new text in *key (idem_key_from_header:
// 22023 for a malformed value, 22001 for a key over 255 bytes), or false with that refusal in
// *pe, for the caller to raise or answer.
bool parse(Datum header, Datum *key, PendingError *pe);

} // namespace idem::pg::key_header
