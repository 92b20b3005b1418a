// What other files ask of src/fingerprints.cpp.
#pragma once

#include "pg_cpp.hpp"

namespace idem::pg::fingerprints {

// The fingerprint of a raw request body, as idem_fingerprint(bytea) without path filters: true
// with the 32-byte digest in *out, or false with the core's refusal in *pe (not I-JSON, invalid
// UTF-8, too deep, too large, or a cancel: the caller raises what is not the sender's fault).
bool body_fingerprint(const char *s, size_t len, bytea **out, PendingError *pe);

} // namespace idem::pg::fingerprints
