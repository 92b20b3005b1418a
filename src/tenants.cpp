// Tenants apart (docs/tenants.md): the bindings of idempotency.bindings, kept per backend,
// and the checks every stateful function makes before it reads or writes anything.
//
// The functions run as the extension owner around their SPI calls (src/spi_util.hpp) and the
// new-key claim and the inbox's first delivery write through the access methods
// (src/direct_access.cpp): row-level security cannot tell tenants apart. So each function checks
// its scope, consumer or topic against the bindings as the caller (GetUserId()), before
// idem::pg::enter. The bindings are read once per backend with a heap scan (no SPI, no
// privilege needed) and kept until the relcache invalidates the table: its statement trigger
// (idem_bindings_changed) invalidates it on every change, which other backends take at their
// next transaction or lock. With no binding, or no table (a 0.7 schema before ALTER EXTENSION
// UPDATE), a check is one branch (tenants.hpp).
#include "tenants.hpp"
#include "spi_util.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include <cstring>

namespace idem::pg::tenants {

State state = State::Unknown;

namespace {

// One binding: the names of a kind that start with prefix belong to members of role.
struct Binding {
    int kind;
    Oid role;
    int len;
    char *prefix; // NUL-terminated copy
};

const char *const KIND_NAMES[N_KINDS] = {"scope", "consumer", "topic"};

MemoryContext cache_cxt = nullptr;
Binding *bindings = nullptr; // by kind, the longest prefix first
int n_bindings = 0;
int n_of_kind[N_KINDS];
Oid bindings_relid = InvalidOid; // InvalidOid while the table is absent
uint64 invalidations = 0;
bool callback_registered = false;

// Forgets the bindings when the table changes (or everything is invalidated). While the table
// is absent any invalidation counts: the one of its creation names an OID not yet known.
void relcache_changed(Datum, Oid relid) {
    if (relid == InvalidOid || relid == bindings_relid || !OidIsValid(bindings_relid)) {
        state = State::Unknown;
        invalidations++;
    }
}

// The kind a kind column spells, or -1.
int kind_of(text *t) {
    const char *s = VARDATA_ANY(t);
    size_t len = VARSIZE_ANY_EXHDR(t);
    for (int k = 0; k < N_KINDS; k++)
        if (strlen(KIND_NAMES[k]) == len && memcmp(KIND_NAMES[k], s, len) == 0)
            return k;
    return -1;
}

int by_kind_longest_first(const void *a, const void *b) {
    const Binding *x = static_cast<const Binding *>(a);
    const Binding *y = static_cast<const Binding *>(b);
    return x->kind != y->kind ? x->kind - y->kind : y->len - x->len;
}

// Appends the binding of one row to the cache.
void add_binding(int kind, text *prefix, Oid role, int *cap) {
    if (n_bindings == *cap) {
        *cap = *cap == 0 ? 16 : *cap * 2;
        size_t size = sizeof(Binding) * static_cast<size_t>(*cap);
        bindings = static_cast<Binding *>(bindings == nullptr ? MemoryContextAlloc(cache_cxt, size)
                                                              : repalloc(bindings, size));
    }
    Binding *b = &bindings[n_bindings++];
    b->kind = kind;
    b->role = role;
    b->len = static_cast<int>(VARSIZE_ANY_EXHDR(prefix));
    b->prefix = static_cast<char *>(MemoryContextAlloc(cache_cxt, b->len + 1));
    memcpy(b->prefix, VARDATA_ANY(prefix), b->len);
    b->prefix[b->len] = '\0';
    n_of_kind[kind]++;
}

// Reads every row of the table, with the latest snapshot: what the cache keeps must not be a
// repeatable-read transaction's old view, since no invalidation would follow.
void read_bindings(Relation rel) {
    TupleDesc desc = RelationGetDescr(rel);
    if (desc->natts < 3 || TupleDescAttr(desc, 0)->atttypid != TEXTOID ||
        TupleDescAttr(desc, 1)->atttypid != TEXTOID ||
        TupleDescAttr(desc, 2)->atttypid != REGROLEOID)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("idempotency.bindings is not the extension's table"),
                        errdetail("Its first columns must be kind text, prefix text and role "
                                  "regrole.")));
    Snapshot snap = RegisterSnapshot(GetLatestSnapshot());
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snap, 0, nullptr);
    int cap = 0;
    HeapTuple tup;
    while ((tup = systable_getnext(scan)) != nullptr) {
        bool null[3];
        Datum d[3];
        for (int i = 0; i < 3; i++)
            d[i] = heap_getattr(tup, i + 1, desc, &null[i]);
        if (null[0] || null[1] || null[2])
            continue;
        int kind = kind_of(DatumGetTextPP(d[0]));
        if (kind >= 0)
            add_binding(kind, DatumGetTextPP(d[1]), DatumGetObjectId(d[2]), &cap);
    }
    systable_endscan(scan);
    UnregisterSnapshot(snap);
    if (n_bindings > 1)
        qsort(bindings, n_bindings, sizeof(Binding), by_kind_longest_first);
}

// Reads the bindings into the cache. An invalidation that arrives while they are read leaves
// the state Unknown (read again by the next check); this call uses what it read.
void load() {
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(relcache_changed, (Datum)0);
        callback_registered = true;
    }
    if (cache_cxt == nullptr)
        cache_cxt =
            AllocSetContextCreate(CacheMemoryContext, "idempotency bindings", ALLOCSET_SMALL_SIZES);
    MemoryContextReset(cache_cxt);
    bindings = nullptr;
    n_bindings = 0;
    memset(n_of_kind, 0, sizeof n_of_kind);
    Oid nsp = get_namespace_oid("idempotency", true);
    Oid relid = OidIsValid(nsp) ? get_relname_relid("bindings", nsp) : InvalidOid;
    bindings_relid = relid;
    Relation rel = OidIsValid(relid) ? try_table_open(relid, AccessShareLock) : nullptr;
    if (rel == nullptr)
        bindings_relid = InvalidOid;
    uint64 seen = invalidations; // after the lock, which took the pending invalidations
    if (rel != nullptr) {
        read_bindings(rel);
        table_close(rel, AccessShareLock);
    }
    if (invalidations == seen)
        state = n_bindings > 0 ? State::Some : State::None;
}

// The binding of name: the longest prefix of its kind that name starts with, or NULL.
const Binding *match(int kind, const char *name, size_t len) {
    for (int i = 0; i < n_bindings; i++) {
        const Binding &b = bindings[i];
        if (b.kind == kind && static_cast<size_t>(b.len) <= len &&
            memcmp(b.prefix, name, b.len) == 0)
            return &b;
    }
    return nullptr;
}

// True when user may use name (the binding's role or a role it has the privileges of;
// superusers have every role's).
bool permits(int kind, text *name, Oid user) {
    const Binding *b = match(kind, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
    return b == nullptr || has_privs_of_role(user, b->role);
}

// The bound role of b for a message: role "name", or a dropped role (OID n).
const char *role_text(const Binding *b) {
    const char *role = GetUserNameFromId(b->role, true);
    return role != nullptr ? psprintf("role \"%s\"", role)
                           : psprintf("a dropped role (OID %u)", b->role);
}

// 42501 for user and name, which a binding refuses it. An outbox event's stored topic (event
// not NULL) is not named: the caller named only the event.
[[noreturn]] void refuse(int kind, text *name, Oid user, const char *event = nullptr) {
    const Binding *b = match(kind, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
    const char *who = GetUserNameFromId(user, false);
    if (event != nullptr)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied for the topic of outbox event %s", event),
                        errdetail("The event's topic is bound to %s (idempotency.bindings), and "
                                  "role \"%s\" is not a member of it.",
                                  role_text(b), who),
                        errhint("Call it as a member of the bound role.")));
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
             errmsg("permission denied for %s \"%s\"", KIND_NAMES[kind], text_to_cstring(name)),
             errdetail("The %s prefix \"%s\" is bound to %s (idempotency.bindings), and role "
                       "\"%s\" is not a member of it.",
                       KIND_NAMES[kind], b->prefix, role_text(b), who),
             errhint("Call it as a member of the bound role; the extension's owner changes "
                     "bindings with idem_bind and idem_unbind.")));
    pg_unreachable();
}

// The stored topic of an event, read by idem_outbox_done, fail and requeue's check.
const char *const SQL_TOPIC =
    "SELECT o.topic::pg_catalog.text FROM idempotency.outbox o WHERE o.event_id "
    "OPERATOR(pg_catalog.=) $1";
const Oid TOPIC_TYPES[] = {UUIDOID};
SPIPlanPtr plan_topic;

} // namespace

// (tenants.hpp)
void check_bound(Kind kind, Datum name) {
    if (state == State::Unknown)
        load();
    if (n_of_kind[kind] == 0)
        return;
    text *t = DatumGetTextPP(name);
    Oid user = GetUserId();
    if (!permits(kind, t, user))
        refuse(kind, t, user);
}

// (tenants.hpp)
void check_event_bound(Datum event_id, bool has_topic, Datum topic) {
    if (has_topic)
        check_bound(TOPIC, topic);
    if (state == State::Unknown)
        load();
    if (n_of_kind[TOPIC] == 0)
        return;
    Oid user = GetUserId();
    SavedUser su;
    enter(&su);
    saved_plan(&plan_topic, SQL_TOPIC, 1, TOPIC_TYPES);
    uint64 n = exec(plan_topic, &event_id, nullptr, true, 0);
    for (uint64 r = 0; r < n; r++) {
        bool isnull;
        text *t = DatumGetTextPP(col(r, 1, &isnull));
        if (!permits(TOPIC, t, user))
            // the (sub)transaction's abort leaves SPI and the owner
            refuse(TOPIC, t, user, DatumGetCString(DirectFunctionCall1(uuid_out, event_id)));
    }
    leave(&su);
}

// (tenants.hpp)
bool stuck_filter_on() {
    if (state == State::None)
        return false;
    if (state == State::Unknown)
        load();
    return n_of_kind[SCOPE] > 0;
}

// (tenants.hpp)
bool scope_permitted(Datum scope, Oid user) {
    return permits(SCOPE, DatumGetTextPP(scope), user);
}

} // namespace idem::pg::tenants

// idempotency.idem_bindings_changed(): the statement trigger of idempotency.bindings; its
// relcache invalidation makes every backend read the bindings again (this one at the next
// command, the others when the transaction commits).
IDEM_PG_FUNCTION(idem_bindings_changed) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("idem_bindings_changed is called only as a trigger")));
    auto *td = reinterpret_cast<TriggerData *>(fcinfo->context);
    CacheInvalidateRelcache(td->tg_relation);
    return PointerGetDatum(nullptr);
}
