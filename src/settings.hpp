// Settings (GUCs) of the extension; defined in _PG_init (src/settings.cpp).
#pragma once

namespace idem::settings {
extern int default_lease_s;     // idempotency.default_lease, seconds
extern int default_ttl_s;       // idempotency.default_ttl, seconds
extern int inbox_ttl_s;         // idempotency.inbox_ttl, seconds
extern int inbox_lease_s;       // idempotency.inbox_lease, seconds
extern int webhook_tolerance_s; // idempotency.webhook_tolerance, seconds
extern bool direct_access;      // idempotency.direct_access
} // namespace idem::settings
