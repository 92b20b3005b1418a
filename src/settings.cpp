// The settings (GUCs): their definitions (settings::define_all, called by _PG_init in
// src/module.cpp), hooks and accessors' error.
//
// Every setting is a string setting whose hooks parse the value (seconds with PostgreSQL's
// units, or a Boolean). An integer or Boolean setting cannot hold a value that does not parse,
// so wherever PostgreSQL cannot refuse such a value to whoever set it (a value set before the
// library was loaded, stored by ALTER DATABASE / ROLE ... SET, read from postgresql.conf), it
// warns at most and the default (or an older value) silently takes over. Here that value stays
// in effect as written, with its source, and the accessors (settings.hpp) raise 22023 while it
// is: PostgreSQL's own rules then decide, as for any value, when it ends (SET, RESET, the end of
// a transaction, a reload, a new session). Where PostgreSQL does report a refusal (SET,
// ALTER ... SET and ALTER SYSTEM in a session that loaded the library, the connection's
// options under shared_preload_libraries) the value is refused with 22023 as before.
#include "pg_cpp.hpp"
#include "pg_compat.hpp"
#include "settings.hpp"

#include <climits>
#include <cstdio>

extern "C" {
#include "access/parallel.h"
#include "tcop/pquery.h"
#include "utils/guc.h"
}

namespace idem::settings::detail {
Value values[COUNT] = {{60, true},       {24 * 3600, true}, {7 * 24 * 3600, true}, {60, true},
                       {300, true},      {1, true},         {7 * 24 * 3600, true}, {60, true},
                       {20, true},       {1, true},         {3600, true},          {1, true},
                       {0, true},        {1, true},         {16 << 20, true},      {100, true},
                       {64 << 10, true}, {16 << 20, true},  {16 << 20, true},      {64 << 10, true},
                       {1000, true}};
} // namespace idem::settings::detail

namespace {

using idem::settings::COUNT;
using idem::settings::Id;
using idem::settings::detail::values;

// What a setting's text is: a duration in seconds (with PostgreSQL's units), a Boolean, a
// plain count, or a size in bytes (with PostgreSQL's units: B, kB, MB, GB).
enum class Kind { Duration, Boolean, Count, Bytes };

struct Setting {
    const char *name;
    const char *short_desc;
    const char *long_desc;
    const char *boot; // the default, as SHOW prints it
    int min;          // seconds (or a count): the range is min .. INT_MAX
    Kind kind;
    char *text;       // the setting's string variable: the value in effect as written
    GucSource source; // where the value in effect came from (the assign hook keeps it)
    bool suset;       // superusers (and roles granted SET on it) only: PGC_SUSET
};

// The bounds of stored values (src/limits.cpp): superuser settings, so that a role that may call
// the functions cannot lift them (only superusers, and roles granted SET on them, change them).
Setting bound(const char *name, const char *what, const char *boot, Kind kind) {
    return {name,
            what,
            "Past it the call fails with 54000 and writes nothing.",
            boot,
            0,
            kind,
            nullptr,
            PGC_S_DEFAULT,
            true};
}

Setting table[COUNT] = {
    {"idempotency.default_lease", "Lease given to a claim when idem_claim gets no lease argument.",
     "A processing record whose lease has expired can be reclaimed.", "1min", 1, Kind::Duration,
     nullptr, PGC_S_DEFAULT},
    {"idempotency.default_ttl", "How long a finished Idempotency-Key record is kept for replay.",
     "Used when idem_claim gets no ttl argument; past it the record counts as absent and "
     "idem_purge may delete it.",
     "1d", 1, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.inbox_ttl", "How long inbox entries are kept for duplicate detection.",
     "Should cover the broker's redelivery window (DLQ replays, offset resets) and the webhook "
     "sender's retry schedule.",
     "7d", 1, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.inbox_lease", "Lease given to inbox events taken by idem_inbox_next.", nullptr,
     "1min", 1, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.webhook_tolerance",
     "Largest accepted difference between a webhook's signed timestamp and the server clock, in "
     "both directions.",
     nullptr, "5min", 0, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.direct_access",
     "Lets idem_claim and idem_inbox_receive write a first row (and idem_claim read a record) "
     "through the table and index access methods.",
     "Off: the same INSERT ... ON CONFLICT DO NOTHING and SELECT run as SQL statements (slower, "
     "same results).",
     "on", 0, Kind::Boolean, nullptr, PGC_S_DEFAULT},
    {"idempotency.outbox_ttl", "How long a done outbox event is kept (its dedup_key with it).",
     "A second idem_outbox_emit with the same topic and dedup_key writes nothing while the first "
     "event is kept; past it idem_purge may delete the event.",
     "7d", 1, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.outbox_lease", "Lease given to outbox events taken by idem_outbox_next.", nullptr,
     "1min", 1, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.max_attempts",
     "Attempts an inbox or outbox event gets before it is dead (0: no limit).",
     "Counts every attempt handed out since the event was queued or requeued, also those whose "
     "worker died and let the lease expire.",
     "20", 0, Kind::Count, nullptr, PGC_S_DEFAULT},
    {"idempotency.retry_backoff_base",
     "Delay before the first retry of a failed inbox or outbox event (0: retry at once).",
     "Doubles with every attempt up to idempotency.retry_backoff_max; the second half of each "
     "delay is random (jitter).",
     "1s", 0, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.retry_backoff_max", "Longest delay before a retry of a failed event.", nullptr,
     "1h", 0, Kind::Duration, nullptr, PGC_S_DEFAULT},
    {"idempotency.outbox_dead_blocks_key",
     "A dead outbox event holds back the later events of its key until it is requeued or "
     "deleted.",
     "Off: the later events of its key are handed out past it (their order relative to the dead "
     "event is lost).",
     "on", 0, Kind::Boolean, nullptr, PGC_S_DEFAULT},
    {"idempotency.outbox_notify",
     "idem_outbox_emit sends NOTIFY idem_outbox, with an empty payload.",
     "Relays LISTEN instead of polling and poll their topics on a wake-up (any role may LISTEN: "
     "the "
     "payload names no topic); every committing transaction that notified takes a global lock "
     "of the notification queue at commit.",
     "off", 0, Kind::Boolean, nullptr, PGC_S_DEFAULT},
    {"idempotency.claim_scan", "Plans SELECT ... FROM idem_claim(...) as idem_claim's custom scan.",
     "The custom scan returns the claim's row without the function scan's tuplestore and row "
     "descriptor copies; off: a function scan (same results). Applies to statements planned "
     "after it changes.",
     "on", 0, Kind::Boolean, nullptr, PGC_S_DEFAULT},
    bound("idempotency.max_response_bytes",
          "Largest resource_id, response and response_body idem_complete / idem_fail store.",
          "16MB", Kind::Bytes),
    bound("idempotency.max_response_headers",
          "Most response_headers idem_complete / idem_fail store for one response.", "100",
          Kind::Count),
    bound("idempotency.max_response_header_bytes",
          "Largest total of the names and values of one response's response_headers.", "64kB",
          Kind::Bytes),
    bound("idempotency.max_outbox_payload_bytes",
          "Largest payload, and largest headers, of an outbox event (idem_outbox_emit).", "16MB",
          Kind::Bytes),
    bound("idempotency.max_inbox_payload_bytes",
          "Largest payload of a queued inbox event (idem_inbox_receive, idem_webhook_receive).",
          "16MB", Kind::Bytes),
    bound("idempotency.max_error_bytes",
          "Largest error text idem_outbox_fail / idem_inbox_fail keep as last_error.", "64kB",
          Kind::Bytes),
    bound("idempotency.max_outbox_keys_per_transaction",
          "Most distinct outbox keys one transaction may emit with (each holds a lock until "
          "the transaction ends).",
          "1000", Kind::Count),
};

// True while define_all defines the settings: PostgreSQL then applies the values set before the
// library was loaded, and only warns about one it refuses.
bool defining = false;

// What the check hook found; PostgreSQL keeps it with the value (also on the GUC stack) and hands
// it to the assign hook.
struct Parsed {
    int value;
    bool valid;
    GucSource source;
};

enum class Verdict { Valid, Syntax, Range };

struct Checked {
    Verdict verdict;
    int value;        // seconds, or 0/1
    const char *hint; // parse_int's, for a syntax error
};

int unit_flags(Kind kind) {
    return kind == Kind::Duration ? GUC_UNIT_S : kind == Kind::Bytes ? GUC_UNIT_BYTE : 0;
}

Checked parse(const Setting &s, const char *text) {
    Checked r{Verdict::Valid, 0, nullptr};
    if (s.kind == Kind::Boolean) {
        bool b = false;
        if (text == nullptr || !parse_bool(text, &b))
            r.verdict = Verdict::Syntax;
        r.value = b ? 1 : 0;
    } else if (text == nullptr || !parse_int(text, &r.value, unit_flags(s.kind), &r.hint)) {
        r.verdict = Verdict::Syntax; // also beyond the integer range (INT_MAX is the maximum)
    } else if (r.value < s.min) {
        r.verdict = Verdict::Range;
    }
    return r;
}

// For a value that is not a number at all (parse_int has a hint of its own for a wrong unit and
// for a number beyond the integer range).
constexpr const char *DURATION_HINT =
    "A duration is a number of seconds, or a number with a unit: \"30s\", \"5min\", \"2h\", "
    "\"7d\".";

// Whether an invalid value from source is kept (the functions that use the setting then fail)
// rather than refused. Kept where PostgreSQL would only warn or log and go on with another value:
// while the library is being loaded, in a parallel worker taking over its leader's settings, for
// the ALTER DATABASE / ROLE ... SET values applied at login, and for postgresql.conf read at a
// reload (no statement running; ALTER SYSTEM and the pg_file_settings view check the file's
// values inside a statement, and refuse).
bool keep_invalid(GucSource source) {
    if (defining || InitializingParallelWorker)
        return true;
    switch (source) {
    case PGC_S_GLOBAL:
    case PGC_S_DATABASE:
    case PGC_S_USER:
    case PGC_S_DATABASE_USER:
        return true;
    case PGC_S_FILE:
        return ActivePortal == nullptr;
    default:
        return false;
    }
}

// Where a value came from, for errdetail ("It comes from ...").
const char *source_name(GucSource source) {
    switch (source) {
    case PGC_S_FILE:
        return "the configuration file (postgresql.conf, or postgresql.auto.conf for ALTER SYSTEM)";
    case PGC_S_ARGV:
        return "the server's command line";
    case PGC_S_GLOBAL:
        return "ALTER ROLE ALL SET";
    case PGC_S_DATABASE:
        return "ALTER DATABASE ... SET";
    case PGC_S_USER:
        return "ALTER ROLE ... SET";
    case PGC_S_DATABASE_USER:
        return "ALTER ROLE ... IN DATABASE ... SET";
    case PGC_S_CLIENT:
        return "the connection's options (PGOPTIONS, options=-c)";
    case PGC_S_SESSION:
        return "a SET before the extension's library was loaded";
    default:
        return "this session";
    }
}

// errdetail (inside ereport) of an invalid value: what is wrong with it, where it came from.
int errdetail_invalid(const Setting &s, const Checked &r, const char *text, GucSource source) {
    const char *from = source_name(source);
    if (text == nullptr)
        text = "";
    if (s.kind == Kind::Boolean)
        return errdetail("The value \"%s\" is not a Boolean: on, off, true, false, yes, no, 1 or "
                         "0. It comes from %s.",
                         text, from);
    if (s.kind == Kind::Count)
        return errdetail("The value \"%s\" is not a whole number from %d to %d. It comes from %s.",
                         text, s.min, INT_MAX, from);
    if (s.kind == Kind::Bytes)
        return errdetail(
            "The value \"%s\" is not a size from %d to %d bytes: a number of bytes, "
            "or a number with a unit (\"B\", \"kB\", \"MB\", \"GB\"). It comes from %s.",
            text, s.min, INT_MAX, from);
    if (r.verdict == Verdict::Range)
        return errdetail("The value \"%s\" is %d s, outside the valid range %d s .. %d s. It "
                         "comes from %s.",
                         text, r.value, s.min, INT_MAX, from);
    return errdetail(
        "The value \"%s\" is not a duration from %d s to %d s: a number of seconds, or "
        "a number with a unit (\"us\", \"ms\", \"s\", \"min\", \"h\", \"d\"). It "
        "comes from %s.",
        text, s.min, INT_MAX, from);
}

// The refusal PostgreSQL raises (or logs) for the value, in PostgreSQL's words for an integer or
// Boolean setting; the range with its unit on every major (17 and later print it so).
void refuse(const Setting &s, const Checked &r) {
    GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
    if (s.kind == Kind::Boolean)
        GUC_check_errmsg("parameter \"%s\" requires a Boolean value", s.name);
    else if (s.kind == Kind::Bytes && r.verdict == Verdict::Range)
        GUC_check_errmsg("%d B is outside the valid range for parameter \"%s\" (%d B .. %d B)",
                         r.value, s.name, s.min, INT_MAX);
    else if (s.kind == Kind::Bytes && r.hint == nullptr)
        GUC_check_errmsg("invalid value for parameter \"%s\": a size in bytes is required "
                         "(\"65536\", \"64kB\", \"16MB\")",
                         s.name);
    else if (s.kind == Kind::Count && r.verdict == Verdict::Range)
        GUC_check_errmsg("%d is outside the valid range for parameter \"%s\" (%d .. %d)", r.value,
                         s.name, s.min, INT_MAX);
    else if (s.kind == Kind::Count)
        GUC_check_errmsg("invalid value for parameter \"%s\": a whole number is required", s.name);
    else if (r.verdict == Verdict::Range)
        GUC_check_errmsg("%d s is outside the valid range for parameter \"%s\" (%d s .. %d s)",
                         r.value, s.name, s.min, INT_MAX);
    else
        GUC_check_errhint("%s", r.hint != nullptr ? r.hint : DURATION_HINT);
}

// Says that an invalid value was kept: a WARNING to the session (or the server log) that loads
// the library or logs in, LOG in the postmaster for a reload (backends stay quiet then, as
// PostgreSQL's own reports of the configuration file do); nothing in a parallel worker.
void report_kept(const Setting &s, const Checked &r, const char *text, GucSource source) {
    if (InitializingParallelWorker)
        return;
    int elevel = WARNING;
    if (!defining && source == PGC_S_FILE)
        elevel = IsUnderPostmaster ? DEBUG3 : LOG;
    ereport(elevel, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                     errmsg("invalid value for parameter \"%s\": \"%s\"", s.name, text ? text : ""),
                     errdetail_invalid(s, r, text, source),
                     errhint("The functions that use the setting fail until it is corrected.")));
}

template <int I> bool check_hook(char **newval, void **extra, GucSource source) {
    const Setting &s = table[I];
    Checked r = parse(s, *newval);
    bool valid = r.verdict == Verdict::Valid;
    if (!valid && !keep_invalid(source)) {
        refuse(s, r);
        return false;
    }
    auto *p = static_cast<Parsed *>(idem::pg::compat::guc_extra_alloc(sizeof(Parsed)));
    if (p == nullptr)
        return false;
    *p = Parsed{r.value, valid, source};
    *extra = p;
    if (!valid)
        report_kept(s, r, *newval, source);
    return true;
}

template <int I> void assign_hook(const char *, void *extra) {
    const auto *p = static_cast<const Parsed *>(extra);
    if (p == nullptr)
        return;
    values[I] = {p->value, p->valid};
    table[I].source = p->source;
}

// SHOW, current_setting() and pg_settings: a valid duration as PostgreSQL prints an integer
// setting in seconds (the largest unit that divides it: 1min, 1d, 90s), an invalid value as
// written.
template <int I> const char *show_hook() {
    static char buf[32];
    const Setting &s = table[I];
    if (!values[I].valid)
        return s.text != nullptr ? s.text : "";
    int v = values[I].value;
    if (s.kind == Kind::Boolean)
        return v ? "on" : "off";
    if (s.kind == Kind::Count || v <= 0) {
        snprintf(buf, sizeof buf, "%d", v);
        return buf;
    }
    // The largest unit that divides the value, as PostgreSQL prints seconds and bytes.
    static const struct {
        int size;
        const char *unit;
    } units[2][4] = {{{86400, "d"}, {3600, "h"}, {60, "min"}, {1, "s"}},
                     {{1 << 30, "GB"}, {1 << 20, "MB"}, {1 << 10, "kB"}, {1, "B"}}};
    for (const auto &u : units[s.kind == Kind::Bytes ? 1 : 0])
        if (v % u.size == 0) {
            snprintf(buf, sizeof buf, "%d%s", v / u.size, u.unit);
            break;
        }
    return buf;
}

template <int I> void define() {
    Setting &s = table[I];
    DefineCustomStringVariable(s.name, s.short_desc, s.long_desc, &s.text, s.boot,
                               s.suset ? PGC_SUSET : PGC_USERSET, 0, check_hook<I>, assign_hook<I>,
                               show_hook<I>);
}

} // namespace

namespace idem::settings::detail {

void raise_invalid(Id id) {
    const Setting &s = table[id];
    Checked r = parse(s, s.text);
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid value for setting \"%s\"", s.name),
                    errdetail_invalid(s, r, s.text, s.source),
                    errhint("Correct the value where it is set, or SET %s to a valid value in "
                            "this session.",
                            s.name)));
    pg_unreachable();
}

} // namespace idem::settings::detail

// Defines the settings; called once per process by _PG_init when the library is loaded.
void idem::settings::define_all() {
    defining = true;
    PG_TRY();
    {
        define<idem::settings::DEFAULT_LEASE>();
        define<idem::settings::DEFAULT_TTL>();
        define<idem::settings::INBOX_TTL>();
        define<idem::settings::INBOX_LEASE>();
        define<idem::settings::WEBHOOK_TOLERANCE>();
        define<idem::settings::DIRECT_ACCESS>();
        define<idem::settings::OUTBOX_TTL>();
        define<idem::settings::OUTBOX_LEASE>();
        define<idem::settings::MAX_ATTEMPTS>();
        define<idem::settings::RETRY_BACKOFF_BASE>();
        define<idem::settings::RETRY_BACKOFF_MAX>();
        define<idem::settings::OUTBOX_DEAD_BLOCKS_KEY>();
        define<idem::settings::OUTBOX_NOTIFY>();
        define<idem::settings::CLAIM_SCAN>();
        define<idem::settings::MAX_RESPONSE_BYTES>();
        define<idem::settings::MAX_RESPONSE_HEADERS>();
        define<idem::settings::MAX_RESPONSE_HEADER_BYTES>();
        define<idem::settings::MAX_OUTBOX_PAYLOAD_BYTES>();
        define<idem::settings::MAX_INBOX_PAYLOAD_BYTES>();
        define<idem::settings::MAX_ERROR_BYTES>();
        define<idem::settings::MAX_OUTBOX_KEYS_PER_TRANSACTION>();
    }
    PG_CATCH();
    {
        // A definition failed (the library's load then fails). PG_CATCH, not PG_FINALLY: the
        // latter's flag set after the longjmp is what GCC's -Wclobbered flags in the cassert build.
        defining = false;
        PG_RE_THROW();
    }
    PG_END_TRY();
    defining = false;
    MarkGUCPrefixReserved("idempotency");
}
