// The bounds of what callers store (limits.hpp). Found by an attacker review: a
// response of 20,000 headers, 200 MB bodies, and an emit loop over ~140,000 distinct keys that
// filled the server's shared lock table, after which every new connection to every database
// failed with "out of shared memory" until the emitting transaction ended.
#include "limits.hpp"
#include "http_fields.hpp"
#include "settings.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/xact.h"
#include "utils/memutils.h"
}

namespace {

using idem::settings::Id;

struct CapSetting {
    Id id;
    const char *name;
};

CapSetting setting_of(idem::pg::limits::Cap cap) {
    using idem::pg::limits::Cap;
    switch (cap) {
    case Cap::Response:
        return {idem::settings::MAX_RESPONSE_BYTES, "idempotency.max_response_bytes"};
    case Cap::OutboxPayload:
        return {idem::settings::MAX_OUTBOX_PAYLOAD_BYTES, "idempotency.max_outbox_payload_bytes"};
    case Cap::InboxPayload:
        return {idem::settings::MAX_INBOX_PAYLOAD_BYTES, "idempotency.max_inbox_payload_bytes"};
    default:
        return {idem::settings::MAX_ERROR_BYTES, "idempotency.max_error_bytes"};
    }
}

// The distinct outbox keys this transaction holds locks on, and where a subtransaction that
// took some started counting: a subtransaction rolled back releases its locks, and the count
// goes back to what it was when the subtransaction took its first key. An entry belongs to
// the innermost subtransaction that took a key since its parent's entry (ascending ids).
struct SubCount {
    SubTransactionId sub;
    int before;
};
int keys_locked = 0;
SubCount *subs = nullptr;
int nsubs = 0, subs_cap = 0;

void on_xact(XactEvent event, void *) {
    if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
        event != XACT_EVENT_PRE_PREPARE)
        keys_locked = nsubs = 0;
}

void on_subxact(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void *) {
    if (nsubs == 0 || subs[nsubs - 1].sub != sub)
        return;
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        keys_locked = subs[--nsubs].before;
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        // The locks now belong to the parent: its entry (if any) counts from earlier.
        if (parent == TopSubTransactionId || (nsubs >= 2 && subs[nsubs - 2].sub == parent))
            nsubs--;
        else
            subs[nsubs - 1].sub = parent;
    }
}

// Counts a key newly locked by the current (sub)transaction.
void count_new_key() {
    static bool registered = false;
    if (!registered) {
        RegisterXactCallback(on_xact, nullptr);
        RegisterSubXactCallback(on_subxact, nullptr);
        registered = true;
    }
    SubTransactionId cur = GetCurrentSubTransactionId();
    if (cur != TopSubTransactionId && (nsubs == 0 || subs[nsubs - 1].sub != cur)) {
        if (nsubs == subs_cap) {
            int n = subs_cap == 0 ? 8 : subs_cap * 2;
            subs = static_cast<SubCount *>(
                subs == nullptr ? MemoryContextAlloc(TopMemoryContext, n * sizeof(SubCount))
                                : repalloc(subs, n * sizeof(SubCount)));
            subs_cap = n;
        }
        subs[nsubs++] = {cur, keys_locked};
    }
    keys_locked++;
}

} // namespace

namespace idem::pg::limits {

void check_size(bool isnull, Datum value, Cap cap, const char *what) {
    if (isnull)
        return;
    CapSetting s = setting_of(cap);
    int max = idem::settings::get(s.id);
    Size bytes = toast_raw_datum_size(value) - VARHDRSZ;
    if (bytes > static_cast<Size>(max))
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("the %s argument exceeds %s", what, s.name),
                        errdetail("%s has %zu bytes; %s is %d bytes.", what, bytes, s.name, max),
                        errhint("Store less, or have a superuser raise %s.", s.name)));
}

void check_response_headers(Jsonb *headers) {
    if (!JB_ROOT_IS_OBJECT(headers))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid response_headers"),
                 errdetail("response_headers must be a JSON object, not a JSON %s.",
                           JB_ROOT_IS_SCALAR(headers) ? "scalar" : "array")));
    idem::HeaderLimits lim{
        static_cast<size_t>(idem::settings::get(idem::settings::MAX_RESPONSE_HEADERS)),
        static_cast<size_t>(idem::settings::get(idem::settings::MAX_RESPONSE_HEADER_BYTES))};
    uint32 count = JsonContainerSize(&headers->root);
    // Too many: refused before any header is read (the core checks the count first).
    if (count > lim.max_count)
        idem::pg::call_cpp([&] { idem::validate_response_headers(nullptr, count, lim); });
    auto *fields = static_cast<idem::HeaderField *>(palloc0(sizeof(idem::HeaderField) * count));
    size_t n = 0;
    JsonbIterator *it = JsonbIteratorInit(&headers->root);
    JsonbValue k, v;
    JsonbIteratorToken t;
    while ((t = JsonbIteratorNext(&it, &k, true)) != WJB_DONE) {
        if (t != WJB_KEY)
            continue;
        t = JsonbIteratorNext(&it, &v, true);
        if (v.type != jbvString)
            ereport(ERROR,
                    (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("invalid response_headers"),
                     errdetail("The value of header \"%.*s\" is not a JSON string.",
                               k.val.string.len, k.val.string.val)));
        if (n < count)
            fields[n++] = {std::string_view(k.val.string.val, k.val.string.len),
                           std::string_view(v.val.string.val, v.val.string.len)};
    }
    idem::pg::call_cpp([&] { idem::validate_response_headers(fields, n, lim); });
    pfree(fields);
}

void lock_outbox_key(const LOCKTAG *tag) {
    int max = idem::settings::get(idem::settings::MAX_OUTBOX_KEYS_PER_TRANSACTION);
    if (keys_locked < max) {
        if (LockAcquire(tag, ExclusiveLock, false, false) == LOCKACQUIRE_OK)
            count_new_key();
        return;
    }
    // At the bound: a key this transaction already holds is fine; a new one is refused without
    // waiting for it, and without keeping the lock if it was free.
    LockAcquireResult r = LockAcquire(tag, ExclusiveLock, false, true);
    if (r == LOCKACQUIRE_ALREADY_HELD || r == LOCKACQUIRE_ALREADY_CLEAR)
        return;
    if (r == LOCKACQUIRE_OK)
        LockRelease(tag, ExclusiveLock, false);
    ereport(ERROR,
            (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
             errmsg("too many distinct outbox keys in one transaction"),
             errdetail("This transaction already emitted events of %d distinct keys; "
                       "idempotency.max_outbox_keys_per_transaction is %d. Each key holds a lock "
                       "of the server's shared lock table until the transaction ends.",
                       keys_locked, max),
             errhint("Emit the events in several transactions, emit them without a key, or have a "
                     "superuser raise idempotency.max_outbox_keys_per_transaction (within "
                     "max_locks_per_transaction x (max_connections + "
                     "max_prepared_transactions)).")));
}

} // namespace idem::pg::limits
