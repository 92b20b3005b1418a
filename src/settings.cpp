// Module entry: PG_MODULE_MAGIC and the settings (GUCs).
#include "pg_cpp.hpp"
#include "settings.hpp"
#include "operations.hpp"

#include <climits>

extern "C" {
#include "utils/guc.h"
}

extern "C" {
PG_MODULE_MAGIC;
void _PG_init(void);
}

namespace idem::settings {
int default_lease_s = 60;
int default_ttl_s = 24 * 3600;
int inbox_ttl_s = 7 * 24 * 3600;
int inbox_lease_s = 60;
int webhook_tolerance_s = 300;
bool direct_access = true;
} // namespace idem::settings

// Defines the settings; called once per backend when the library is loaded.
void _PG_init(void) {
    using namespace idem::settings;
    DefineCustomIntVariable("idempotency.default_lease",
                            "Lease given to a claim when idem_claim gets no lease argument.",
                            "A processing record whose lease has expired can be reclaimed.",
                            &default_lease_s, 60, 1, INT_MAX, PGC_USERSET, GUC_UNIT_S, nullptr,
                            nullptr, nullptr);
    DefineCustomIntVariable(
        "idempotency.default_ttl", "How long a finished Idempotency-Key record is kept for replay.",
        "Used when idem_claim gets no ttl argument; past it the record counts "
        "as absent and idem_purge may delete it.",
        &default_ttl_s, 24 * 3600, 1, INT_MAX, PGC_USERSET, GUC_UNIT_S, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("idempotency.inbox_ttl",
                            "How long inbox entries are kept for duplicate detection.",
                            "Should cover the broker's redelivery window (DLQ replays, offset "
                            "resets) and the webhook sender's retry schedule.",
                            &inbox_ttl_s, 7 * 24 * 3600, 1, INT_MAX, PGC_USERSET, GUC_UNIT_S,
                            nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "idempotency.inbox_lease", "Lease given to inbox events taken by idem_inbox_next.", nullptr,
        &inbox_lease_s, 60, 1, INT_MAX, PGC_USERSET, GUC_UNIT_S, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("idempotency.webhook_tolerance",
                            "Largest accepted difference between a webhook's signed timestamp "
                            "and the server clock, in both directions.",
                            nullptr, &webhook_tolerance_s, 300, 0, INT_MAX, PGC_USERSET, GUC_UNIT_S,
                            nullptr, nullptr, nullptr);
    DefineCustomBoolVariable(
        "idempotency.direct_access",
        "Lets idem_claim insert and read records through the table and index access methods.",
        "Off: the same INSERT ... ON CONFLICT DO NOTHING and SELECT run as SQL statements "
        "(slower, same results).",
        &direct_access, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
    MarkGUCPrefixReserved("idempotency");
    idem::operations::init(); // shared-memory counters, only under shared_preload_libraries
}
