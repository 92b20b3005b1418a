// The bounds of what callers store (docs/settings.md, "Bounds"): the sizes of stored values, the
// headers of a stored response, and the distinct outbox keys one transaction locks. Each bound is
// a superuser setting (src/settings.cpp); past it a call fails with 54000 before it writes.
#pragma once

#include "pg_cpp.hpp"

extern "C" {
#include "storage/lock.h"
#include "utils/jsonb.h"
}

namespace idem::pg::limits {

// Which setting bounds a stored value.
enum class Cap {
    Response,      // idempotency.max_response_bytes: resource_id, response, response_body
    OutboxPayload, // idempotency.max_outbox_payload_bytes: an event's payload, its headers
    InboxPayload,  // idempotency.max_inbox_payload_bytes: a queued inbox event's payload
    Error,         // idempotency.max_error_bytes: last_error
};

// 54000 naming the setting when the varlena value (ignored when isnull) has more bytes than
// cap allows (its size uncompressed, as stored: octet_length of text and bytea, the binary
// size of jsonb). what names the argument.
void check_size(bool isnull, Datum value, Cap cap, const char *what);

// 22023 unless headers is a JSON object of header name to string value that
// idem::validate_response_headers accepts (core/http_fields.hpp); 54000 past
// idempotency.max_response_headers or idempotency.max_response_header_bytes.
void check_response_headers(Jsonb *headers);

// Takes an emit's transaction lock on its key (tag, ExclusiveLock). 54000 instead when the key is
// not yet locked by this transaction and idempotency.max_outbox_keys_per_transaction keys are:
// every such lock holds an entry of the server's shared lock table until the transaction ends.
void lock_outbox_key(const LOCKTAG *tag);

} // namespace idem::pg::limits
