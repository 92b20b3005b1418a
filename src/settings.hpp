// Settings (GUCs) of the extension; defined in _PG_init (src/settings.cpp).
//
// Read them through the accessors below. A setting can hold a value that is not valid: one that
// PostgreSQL could not check when it was set (before the library was loaded, stored with
// ALTER DATABASE / ROLE ... SET, read from postgresql.conf) stays as it was written instead of
// silently becoming the default, and its accessor raises 22023 while it is in effect
// (docs/settings.md, "When a value is checked"). A valid setting costs one bool test per read.
#pragma once

namespace idem::settings {

enum Id { DEFAULT_LEASE, DEFAULT_TTL, INBOX_TTL, INBOX_LEASE, WEBHOOK_TOLERANCE, DIRECT_ACCESS };
inline constexpr int COUNT = DIRECT_ACCESS + 1;

namespace detail {
// The value in effect, kept by the setting's assign hook: seconds, or 0/1 for direct_access.
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

// The settings' values (idempotency.default_lease, ...). The seconds are functions so that
// interval_arg_usec and positive_interval_arg (src/errors.hpp, src/inbox.hpp) read them only for
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

} // namespace idem::settings
