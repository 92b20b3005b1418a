// Direct access to idempotency.records (see records_direct.hpp): the records' shape for
// src/direct_access.cpp, and the read of a conflicting record.
#include "records_direct.hpp"
#include "direct_access.hpp"

extern "C" {
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "catalog/pg_type.h"
#include "utils/datum.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/builtins.h"
#include "common/int.h"
}

namespace idem::pg {
namespace {

// The columns of idempotency.records, in the order of the names below (test/drift holds them
// equal to the install script's table: a difference turns the direct path off).
enum Column {
    A_SCOPE,
    A_KEY,
    A_STATUS,
    A_RETRYABLE,
    A_FINGERPRINT,
    A_ATTEMPT,
    A_RESOURCE_ID,
    A_RESPONSE,
    A_RESPONSE_STATUS,
    A_CREATED,
    A_UPDATED,
    A_LEASE_EXPIRES,
    A_EXPIRES,
    A_RESPONSE_BODY,
    A_RESPONSE_HEADERS,
    A_COUNT
};
const char *const COLUMN_NAMES[A_COUNT] = {"scope",       "key",           "status",
                                           "retryable",   "fingerprint",   "attempt",
                                           "resource_id", "response",      "response_status",
                                           "created_at",  "updated_at",    "lease_expires_at",
                                           "expires_at",  "response_body", "response_headers"};
const Oid COLUMN_TYPES[A_COUNT] = {TEXTOID,        TEXTOID,        TEXTOID,        BOOLOID,
                                   BYTEAOID,       INT4OID,        TEXTOID,        JSONBOID,
                                   INT4OID,        TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
                                   TIMESTAMPTZOID, BYTEAOID,       JSONBOID};

// The CHECK constraints of the extension's own table definition. The row insert_new builds
// satisfies both by construction (status 'processing', attempt 1), so they are not evaluated.
const char *const OWN_CHECKS[] = {"records_status_check", "records_attempt_check"};

// A new record leaves these columns NULL (and the lease of a finished one is NULL); retryable has
// the only default (insert_new sets it, as the SQL statement leaves it to the default).
// finish_direct clears the lease. A column the table declares NOT NULL makes it not plain.
constexpr uint32 NULLABLE = 1u << A_FINGERPRINT | 1u << A_RESOURCE_ID | 1u << A_RESPONSE |
                            1u << A_RESPONSE_STATUS | 1u << A_RESPONSE_BODY |
                            1u << A_RESPONSE_HEADERS | 1u << A_LEASE_EXPIRES;
const direct::TableShape SHAPE = {"records",    A_COUNT,          COLUMN_NAMES,
                                  COLUMN_TYPES, OWN_CHECKS,       2, // columns, checks
                                  nullptr,      nullptr,          0, // no index but the primary key
                                  NULLABLE,     1u << A_RETRYABLE};
direct::Table records = {&SHAPE};

// Column att of the deformed slot: its value, and *isnull.
Datum column(const TupleTableSlot *slot, AttrNumber att, bool *isnull) {
    *isnull = slot->tts_isnull[att - 1];
    return slot->tts_values[att - 1];
}

// A varlena column of the deformed slot, copied into cxt.
Datum copied(const TupleTableSlot *slot, AttrNumber att, MemoryContext cxt, bool *isnull) {
    Datum d = column(slot, att, isnull);
    if (*isnull)
        return (Datum)0;
    MemoryContext old = MemoryContextSwitchTo(cxt);
    d = datumCopy(d, false, -1);
    MemoryContextSwitchTo(old);
    return d;
}

// Reads the record in slot into *out, varlena values copied into cxt. The row is deformed once
// (plain_columns checked that the table has the shape's columns and no other): a slot_getattr
// per column deformed it a few columns at a time, 1,000 instructions of a replay.
void fill_record(TupleTableSlot *slot, MemoryContext cxt, StoredRecord *out) {
    const direct::Table &r = records;
    bool isnull;
    slot_getallattrs(slot);
    text *status = DatumGetTextPP(column(slot, r.att[A_STATUS], &isnull));
    out->status = *VARDATA_ANY(status);
    out->retryable = DatumGetBool(column(slot, r.att[A_RETRYABLE], &isnull));
    out->attempt = DatumGetInt32(column(slot, r.att[A_ATTEMPT], &isnull));
    out->fingerprint = copied(slot, r.att[A_FINGERPRINT], cxt, &out->fingerprint_null);
    out->resource_id = copied(slot, r.att[A_RESOURCE_ID], cxt, &out->resource_id_null);
    out->response = copied(slot, r.att[A_RESPONSE], cxt, &out->response_null);
    out->body = copied(slot, r.att[A_RESPONSE_BODY], cxt, &out->body_null);
    out->headers = copied(slot, r.att[A_RESPONSE_HEADERS], cxt, &out->headers_null);
    out->response_status =
        DatumGetInt32(column(slot, r.att[A_RESPONSE_STATUS], &out->response_status_null));
    out->lease_expires_at =
        DatumGetTimestampTz(column(slot, r.att[A_LEASE_EXPIRES], &out->lease_null));
    out->expires_at = DatumGetTimestampTz(column(slot, r.att[A_EXPIRES], &isnull));
}

// What insert_new's reader needs: the memory context for the copies and the record to fill.
struct ReadArgs {
    MemoryContext cxt;
    StoredRecord *out;
};

// The reader of insert_new: the latest committed version of the record, as found.
bool read_conflict(Relation, TupleTableSlot *found, void *arg) {
    auto *a = static_cast<ReadArgs *>(arg);
    fill_record(found, a->cxt, a->out);
    return true;
}

// What finish_direct stores.
struct FinishArgs {
    int32 attempt;
    const RecordOutcome *o;
    TimestampTz now;
};

// The RowChanger of finish_direct: FINISH_SET and FINISH_WHERE of src/records.cpp on the
// visible record. The new expiry, GREATEST(expires_at, now + (expires_at - created_at)) in UTC
// timestamps there, is the same microsecond arithmetic; where the statement would raise (an
// infinite or out-of-range timestamp) it decides. Status and attempt meet the CHECK constraints.
direct::Change change_finish(const TupleTableSlot *found, Datum *v, bool *n, void *arg) {
    const auto *f = static_cast<const FinishArgs *>(arg);
    const direct::Table &r = records;
    for (int c = 0; c < A_COUNT; c++) {
        v[c] = found->tts_values[r.att[c] - 1];
        n[c] = found->tts_isnull[r.att[c] - 1];
    }
    const text *status = DatumGetTextPP(v[A_STATUS]);
    if (DatumGetInt32(v[A_ATTEMPT]) != f->attempt || VARSIZE_ANY_EXHDR(status) != 10 ||
        memcmp(VARDATA_ANY(status), "processing", 10) != 0)
        return direct::Change::Skip;
    TimestampTz created = DatumGetTimestampTz(v[A_CREATED]);
    TimestampTz expires = DatumGetTimestampTz(v[A_EXPIRES]);
    int64 window, kept;
    if (TIMESTAMP_NOT_FINITE(created) || TIMESTAMP_NOT_FINITE(expires) ||
        pg_sub_s64_overflow(expires, created, &window) ||
        pg_add_s64_overflow(f->now, window, &kept) || !IS_VALID_TIMESTAMP(kept))
        return direct::Change::UseSql;
    const RecordOutcome &o = *f->o;
    auto set = [&](Column c, bool isnull, Datum d) {
        n[c] = isnull;
        v[c] = isnull ? (Datum)0 : d;
    };
    set(A_STATUS, false, CStringGetTextDatum(o.status));
    set(A_RETRYABLE, false, BoolGetDatum(o.retryable));
    set(A_RESOURCE_ID, o.rid_null, o.rid);
    set(A_RESPONSE, o.resp_null, o.resp);
    set(A_RESPONSE_STATUS, o.st_null, o.st);
    set(A_UPDATED, false, TimestampTzGetDatum(f->now));
    set(A_LEASE_EXPIRES, true, (Datum)0);
    set(A_EXPIRES, false, TimestampTzGetDatum(kept > expires ? kept : expires));
    set(A_RESPONSE_BODY, o.body_null, o.body);
    set(A_RESPONSE_HEADERS, o.headers_null, o.headers);
    return direct::Change::Write;
}

} // namespace

// (records_direct.hpp) The UPDATE of idem_complete / idem_fail, direct.
direct::UpdateResult finish_direct(Datum scope, Datum key, int32 attempt, const RecordOutcome &o,
                                   TimestampTz now) {
    Datum k[2] = {scope, key};
    FinishArgs args{attempt, &o, now};
    const char *caller = strcmp(o.status, "completed") == 0 ? "idem_complete" : "idem_fail";
    return direct::update(&records, caller, k, change_finish, &args);
}

// (records_direct.hpp) INSERT ... ON CONFLICT (scope, key) DO NOTHING of a new record.
InsertResult insert_new(const NewRecord &rec, bool read, bool nowait, MemoryContext cxt,
                        StoredRecord *out) {
    Datum v[A_COUNT] = {};
    bool n[A_COUNT];
    for (bool &b : n)
        b = true;
    auto set = [&](Column c, Datum d) {
        v[c] = d;
        n[c] = false;
    };
    set(A_SCOPE, rec.scope);
    set(A_KEY, rec.key);
    set(A_STATUS, CStringGetTextDatum("processing"));
    set(A_RETRYABLE, BoolGetDatum(false));
    if (!rec.fingerprint_null)
        set(A_FINGERPRINT, rec.fingerprint);
    set(A_ATTEMPT, Int32GetDatum(1));
    set(A_CREATED, TimestampTzGetDatum(rec.now));
    set(A_UPDATED, TimestampTzGetDatum(rec.now));
    set(A_LEASE_EXPIRES, TimestampTzGetDatum(rec.lease_expires_at));
    set(A_EXPIRES, TimestampTzGetDatum(rec.expires_at));
    ReadArgs args{cxt, out};
    return direct::insert(&records, "idem_claim", v, n, read ? read_conflict : nullptr, &args,
                          nowait);
}

// (records_direct.hpp) The primary key (scope, key) looked up without waiting.
bool record_held(Datum scope, Datum key) {
    Datum k[2] = {scope, key};
    return direct::held_elsewhere(&records, k);
}

} // namespace idem::pg
