// Settings (GUCs) of the extension; defined by define_all (src/settings.cpp) from _PG_init
// (src/module.cpp).
//
// Read them through the accessors below. A setting can hold a value that is not valid: one that
// PostgreSQL could not check when it was set (before the library was loaded, stored with
// ALTER DATABASE / ROLE ... SET, read from postgresql.conf) stays as it was written instead of
// silently becoming the default, and its accessor raises 22023 while it is in effect
// (docs/settings.md, "When a value is checked"). A valid setting costs one bool test per read.
#pragma once

namespace idem::settings {

// Defines every idempotency.* setting and reserves the prefix; once per process, from _PG_init.
void define_all();

enum Id {
    DEFAULT_LEASE,
    DEFAULT_TTL,
    INBOX_TTL,
    INBOX_LEASE,
    WEBHOOK_TOLERANCE,
    DIRECT_ACCESS,
    OUTBOX_TTL,
    OUTBOX_LEASE,
    MAX_ATTEMPTS,
    RETRY_BACKOFF_BASE,
    RETRY_BACKOFF_MAX,
    OUTBOX_DEAD_BLOCKS_KEY,
    OUTBOX_NOTIFY,
    CLAIM_SCAN,
    // The bounds of what callers store (superuser settings, src/limits.cpp).
    MAX_RESPONSE_BYTES,
    MAX_RESPONSE_HEADERS,
    MAX_RESPONSE_HEADER_BYTES,
    MAX_OUTBOX_PAYLOAD_BYTES,
    MAX_INBOX_PAYLOAD_BYTES,
    MAX_ERROR_BYTES,
    MAX_OUTBOX_KEYS_PER_TRANSACTION,
};
inline constexpr int COUNT = MAX_OUTBOX_KEYS_PER_TRANSACTION + 1;

namespace detail {
// The value in effect, kept by the setting's assign hook: seconds, a count (max_attempts), bytes,
// or 0/1 for a Boolean.
struct Value {
    int value;
    bool valid;
};
extern Value values[COUNT];
// 22023: the setting holds a value that is not valid (with the value, where it was set, the
// valid range and what to do).
[[noreturn]] void raise_invalid(Id id);

inline int get(Id id) {
    if (__builtin_expect(!values[id].valid, 0))
        raise_invalid(id);
    return values[id].value;
}
} // namespace detail

// The settings' values (idempotency.default_lease, ...); a bound (MAX_RESPONSE_BYTES, ...) is
// read with get(id) by src/limits.cpp.
inline int get(Id id) {
    return detail::get(id);
}

// The settings' values (idempotency.default_lease, ...). The seconds are functions so that
// interval_arg_usec and positive_interval_arg (src/arguments.hpp, src/inbox.hpp) read them only for
// a NULL argument: a call that passes its interval does not fail on a setting it does not use.
inline int default_lease_s() {
    return detail::get(DEFAULT_LEASE);
}
inline int default_ttl_s() {
    return detail::get(DEFAULT_TTL);
}
inline int inbox_ttl_s() {
    return detail::get(INBOX_TTL);
}
inline int inbox_lease_s() {
    return detail::get(INBOX_LEASE);
}
inline int webhook_tolerance_s() {
    return detail::get(WEBHOOK_TOLERANCE);
}
inline bool direct_access_on() {
    return detail::get(DIRECT_ACCESS) != 0;
}
inline int outbox_ttl_s() {
    return detail::get(OUTBOX_TTL);
}
inline int outbox_lease_s() {
    return detail::get(OUTBOX_LEASE);
}
// Attempts an event of a leased queue (inbox or outbox) gets before it is dead; 0: no limit.
inline int max_attempts() {
    return detail::get(MAX_ATTEMPTS);
}
inline int retry_backoff_base_s() {
    return detail::get(RETRY_BACKOFF_BASE);
}
inline int retry_backoff_max_s() {
    return detail::get(RETRY_BACKOFF_MAX);
}
// A dead outbox event holds back the later events of its key (on), or lets them pass (off).
inline bool outbox_dead_blocks_key() {
    return detail::get(OUTBOX_DEAD_BLOCKS_KEY) != 0;
}
inline bool outbox_notify() {
    return detail::get(OUTBOX_NOTIFY) != 0;
}
// The planner runs SELECT ... FROM idem_claim(...) as idem_claim's custom scan
// (src/records_claim_scan.cpp); off: as a function scan.
inline bool claim_scan_on() {
    return detail::get(CLAIM_SCAN) != 0;
}

} // namespace idem::settings
