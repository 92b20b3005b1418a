// Utilities: idem_uuid_v7, idem_uuid_v7_time (RFC 9562 version 7), idem_hmac_sha256 (RFC 2104)
// and idem_secure_equal (comparison in constant time). The work is the core's (core/uuid7.hpp,
// core/crypto.hpp); this file converts the values.
#include "pg_cpp.hpp"
#include "utilities.hpp"

#include "crypto.hpp"
#include "uuid7.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
}

namespace {

idem::UuidV7Generator *g_uuid = nullptr; // per backend: monotonic within the session

} // namespace

// The session's next UUIDv7, palloc'd.
pg_uuid_t *idem::pg::new_uuid_v7() {
    idem::Uuid id = idem::pg::call_cpp([&] {
        if (g_uuid == nullptr)
            g_uuid = new idem::UuidV7Generator();
        return g_uuid->next();
    });
    pg_uuid_t *u = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t)));
    memcpy(u->data, id.data(), UUID_LEN);
    return u;
}

// idem_uuid_v7() -> uuid: RFC 9562 version 7, strictly increasing within the session.
IDEM_PG_FUNCTION(idem_uuid_v7) {
    PG_RETURN_UUID_P(idem::pg::new_uuid_v7());
}

// idem_uuid_v7_time(uuid) -> timestamptz: the millisecond timestamp of a version-7 UUID.
IDEM_PG_FUNCTION(idem_uuid_v7_time) {
    pg_uuid_t *u = PG_GETARG_UUID_P(0);
    idem::Uuid id;
    memcpy(id.data(), u->data, UUID_LEN);
    if (!IDEM_NOTHROW(idem::is_uuid_v7(id)))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("uuid is not a version 7 UUID"),
                 errdetail("Version %d, variant bits %d%d.", u->data[6] >> 4, (u->data[8] >> 7) & 1,
                           (u->data[8] >> 6) & 1)));
    int64 ms = static_cast<int64>(IDEM_NOTHROW(idem::uuid_v7_unix_ms(id)));
    int64 pg_epoch_ms =
        static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
    PG_RETURN_TIMESTAMPTZ(static_cast<TimestampTz>((ms - pg_epoch_ms) * 1000));
}

// idem_hmac_sha256(key bytea, message bytea) -> bytea: RFC 2104 HMAC with SHA-256.
IDEM_PG_FUNCTION(idem_hmac_sha256) {
    bytea *k = PG_GETARG_BYTEA_PP(0);
    bytea *m = PG_GETARG_BYTEA_PP(1);
    std::string_view key(VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k));
    std::string_view message(VARDATA_ANY(m), VARSIZE_ANY_EXHDR(m));
    idem::Digest d = idem::pg::call_cpp([&] { return idem::hmac_sha256(key, message); });
    PG_RETURN_BYTEA_P(idem::pg::copy_bytea(d.data(), d.size()));
}

// idem_secure_equal(a bytea, b bytea) -> boolean: comparison in time independent of where the
// values differ (only of their lengths).
IDEM_PG_FUNCTION(idem_secure_equal) {
    bytea *a = PG_GETARG_BYTEA_PP(0);
    bytea *b = PG_GETARG_BYTEA_PP(1);
    std::string_view x(VARDATA_ANY(a), VARSIZE_ANY_EXHDR(a));
    std::string_view y(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
    PG_RETURN_BOOL(IDEM_NOTHROW(idem::constant_time_equal(x, y)));
}
