// Tenants apart (docs/tenants.md): scope prefixes, inbox consumers and outbox topics bound
// to roles in idempotency.bindings. A name that a binding matches (the longest matching prefix of
// its kind) may be used only by members of the bound role; a name no binding matches stays open.
// With no binding, or without the table (a 0.7 schema, until ALTER EXTENSION UPDATE), every
// check is one branch.
#pragma once

#include "pg_cpp.hpp"

namespace idem::pg::tenants {

// The kinds of name a binding covers, as idempotency.bindings.kind spells them.
enum Kind { SCOPE = 0, CONSUMER = 1, TOPIC = 2, N_KINDS = 3 };

// What this backend knows of idempotency.bindings: Unknown until read (and after the relcache
// invalidates the table), None when it is empty or absent, Some when it binds anything.
enum class State : unsigned char { Unknown, None, Some };
extern State state;

// check's path when bindings may exist: reads them when unknown, then 42501 unless the current
// user may use name (a text datum) as a kind.
void check_bound(Kind kind, Datum name);

// 42501 unless the current user (GetUserId(): call before idem::pg::enter) may use name, a text
// datum, as a kind. Nothing is read or written.
inline void check(Kind kind, Datum name) {
    if (state != State::None)
        check_bound(kind, name);
}

// check_event's path when bindings may exist.
void check_event_bound(Datum event_id, bool has_topic, Datum topic);

// idem_outbox_done / fail / requeue: 42501 unless the current user may use the topic argument
// (when given) and the stored topic of the event event_id (read as the extension owner). Call
// before idem::pg::enter.
inline void check_event(Datum event_id, bool has_topic, Datum topic) {
    if (state != State::None)
        check_event_bound(event_id, has_topic, topic);
}

// idem_stuck (src/records_stuck.cpp): true when scope bindings exist, so that the rows are
// filtered by scope_permitted (user: the caller, taken before idem::pg::enter).
bool stuck_filter_on();
bool scope_permitted(Datum scope, Oid user);

} // namespace idem::pg::tenants
