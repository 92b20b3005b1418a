// The module's entry: PG_MODULE_MAGIC and _PG_init, which PostgreSQL calls once per process when
// it loads the library (at server start under shared_preload_libraries, else at a session's
// first call). What each feature needs at load time is its own file's: the settings
// (src/settings.cpp), the shared-memory counters (src/counters.cpp), idem_claim's custom scan
// (src/records_claim_scan.cpp).
#include "pg_cpp.hpp"
#include "counters.hpp"
#include "records.hpp"
#include "settings.hpp"

extern "C" {
PG_MODULE_MAGIC;
void _PG_init(void);
}

void _PG_init(void) {
    idem::settings::define_all();
    idem::operations::init(); // shared-memory counters, only under shared_preload_libraries
    idem::pg::records::claim_scan_init();
}
