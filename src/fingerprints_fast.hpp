// The fast path of idem_canonical_json and idem_fingerprint for a jsonb document without path
// filters in a UTF8 database (src/fingerprints_fast.cpp): the canonical text is written straight
// from the jsonb containers into one buffer.
#pragma once

#include "pg_cpp.hpp"

extern "C" {
#include "utils/jsonb.h"
}

namespace idem::pg::fingerprints {

// An output buffer in memory context cxt. Small documents use one buffer kept in
// TopMemoryContext and reused by every call; a document whose jsonb is larger than 256 kB gets a
// buffer in the call's memory context, which PostgreSQL frees even when the call fails.
struct CanonBuf {
    char *data;
    size_t len;
    size_t cap;
    MemoryContext cxt;
};

// Writes the canonical text of jb into a buffer and returns it, or nullptr when the document is
// too deep for the fast path (the caller then takes the iterator path).
CanonBuf *fast_canonical(Jsonb *jb, bool exact);

// Frees a buffer that is not kept for the next call.
void release_buf(CanonBuf *b);

} // namespace idem::pg::fingerprints
