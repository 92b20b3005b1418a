// Webhook signatures: idem_webhook_verify_standard, idem_webhook_verify_stripe,
// idem_webhook_sign_standard, idem_webhook_sign_stripe and idem_webhook_receive (verify, then
// record in the inbox through idem_inbox_receive).
//
// Payloads arrive as text or bytea; both are varlenas whose bytes are signed as they are (never
// jsonb, which re-serialises). The core (core/webhooks.hpp) does the parsing and the constant-time
// comparison inside run_cpp; this file only gathers the bytes and the clock.
//
// The receiver's own arguments (consumer, scheme, secrets, tolerance, ttl, now) raise errors,
// checked before anything the sender sent; the sender's (event id, body, signature headers,
// timestamp) never do: a NULL one is a missing field, which the core answers as an invalid
// signature like a malformed one.
#include "pg_cpp.hpp"
#include "arguments.hpp"
#include "inbox.hpp"
#include "settings.hpp"
#include "tenants.hpp"
#include "crypto.hpp"
#include "lease.hpp"
#include "webhooks.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

extern "C" {
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "utils/array.h"
#include "utils/timestamp.h"
}

extern "C" Datum idem_inbox_receive(PG_FUNCTION_ARGS); // src/inbox.cpp

namespace {

using idem::pg::require_arg;

// Bytes of a detoasted varlena (plain memory, valid for the rest of the call); data is nullptr
// for a NULL argument the sender controls (a missing field).
struct Bytes {
    const char *data;
    size_t len;
};

// The core's view of a sender's field: std::nullopt when it is missing.
std::optional<std::string_view> field(Bytes b) {
    if (b.data == nullptr)
        return std::nullopt;
    return std::string_view(b.data, b.len);
}

constexpr int MAX_SECRETS = 16;

struct Secrets {
    int n;
    Bytes items[MAX_SECRETS];
};

Bytes varlena_bytes(Datum d) {
    struct varlena *v = pg_detoast_datum_packed(reinterpret_cast<struct varlena *>(d));
    return {VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v)};
}

Bytes bytes_arg(FunctionCallInfo fcinfo, int argno, const char *name) {
    require_arg(fcinfo, argno, name);
    return varlena_bytes(PG_GETARG_DATUM(argno));
}

// A field the sender controls: its bytes, or {nullptr, 0} when the argument is NULL.
Bytes sender_arg(FunctionCallInfo fcinfo, int argno) {
    return PG_ARGISNULL(argno) ? Bytes{nullptr, 0} : varlena_bytes(PG_GETARG_DATUM(argno));
}

// The secrets of argument argno: one text, or a text[] without NULLs (1 to 16 elements).
void secrets_arg(FunctionCallInfo fcinfo, int argno, bool is_array, Secrets *out) {
    require_arg(fcinfo, argno, is_array ? "secrets" : "secret",
                "A secret read from an unset setting or column is NULL; check where the receiver "
                "reads its secrets.");
    out->n = 0;
    if (!is_array) {
        out->items[out->n++] = varlena_bytes(PG_GETARG_DATUM(argno));
        return;
    }
    ArrayType *arr = PG_GETARG_ARRAYTYPE_P(argno);
    if (ARR_NDIM(arr) > 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("secrets must be a one-dimensional array"),
                        errhint("Pass ARRAY[current_secret] or, during a key rotation, "
                                "ARRAY[new_secret, old_secret].")));
    Datum *elems;
    bool *nulls;
    int n;
    deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
    if (n > MAX_SECRETS)
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("at most %d webhook secrets are allowed", MAX_SECRETS),
                        errhint("Keep only the secrets a sender may still sign with.")));
    for (int i = 0; i < n; i++) {
        if (nulls[i])
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("webhook secret %d is null", i + 1),
                            errhint("A secret read from an unset setting or column is NULL; "
                                    "check where the receiver reads its secrets.")));
        out->items[out->n++] = varlena_bytes(elems[i]);
    }
}

// The clock: now (or the current time) as unix microseconds, and the tolerance (or the
// idempotency.webhook_tolerance setting).
idem::webhooks::Clock clock_args(FunctionCallInfo fcinfo, int tolerance_arg, int now_arg) {
    TimestampTz now =
        PG_ARGISNULL(now_arg) ? GetCurrentTimestamp() : PG_GETARG_TIMESTAMPTZ(now_arg);
    if (TIMESTAMP_NOT_FINITE(now))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("now must be finite"),
                        errhint("Leave now out (NULL) to use the server clock.")));
    constexpr int64 unix_offset =
        static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
    return idem::webhooks::Clock{
        now + unix_offset,
        idem::pg::interval_arg_usec(fcinfo, tolerance_arg, idem::settings::webhook_tolerance_s)};
}

// Runs a verification in the core; *verdict is set on success. An error is the receiver's own
// (a malformed secret, a negative tolerance): nothing the sender sent raises.
struct VerifyInput {
    bool stripe;
    const Secrets *secrets;
    Bytes msg_id, timestamp, payload, header;
    idem::webhooks::Clock clock;
    bool event_id_usable; // idem_webhook_receive: checked before any HMAC
};

bool run_verify(const VerifyInput &in, idem::webhooks::Verdict *verdict,
                idem::pg::PendingError *pe) {
    return idem::pg::run_cpp(*pe, [&] {
        std::vector<std::string_view> secrets;
        for (int i = 0; i < in.secrets->n; i++)
            secrets.emplace_back(in.secrets->items[i].data, in.secrets->items[i].len);
        idem::webhooks::Checks checks;
        checks.event_id_usable = in.event_id_usable;
        if (in.stripe)
            *verdict = idem::webhooks::verify_stripe(secrets, field(in.header), field(in.payload),
                                                     in.clock, checks);
        else
            *verdict = idem::webhooks::verify_standard(secrets, field(in.msg_id),
                                                       field(in.timestamp), field(in.payload),
                                                       field(in.header), in.clock, checks);
    });
}

// The verdict on a delivery, or the receiver's error.
idem::webhooks::Verdict verdict_of(const VerifyInput &in) {
    idem::pg::PendingError pe;
    idem::webhooks::Verdict verdict = idem::webhooks::Verdict::InvalidSignature;
    if (!run_verify(in, &verdict, &pe))
        idem::pg::raise(pe);
    return verdict;
}

// Shared body of the boolean verify functions; args: secrets, [msg_id, timestamp,] payload,
// header, tolerance, now. The sender's fields may be NULL (false).
Datum verify(FunctionCallInfo fcinfo, bool stripe, bool secrets_array) {
    Secrets secrets;
    secrets_arg(fcinfo, 0, secrets_array, &secrets);
    VerifyInput in{};
    in.stripe = stripe;
    in.secrets = &secrets;
    in.event_id_usable = true;
    int a = 1;
    if (!stripe) {
        in.msg_id = sender_arg(fcinfo, a++);
        in.timestamp = sender_arg(fcinfo, a++);
        in.payload = sender_arg(fcinfo, a++);
        in.header = sender_arg(fcinfo, a++);
    } else {
        in.header = sender_arg(fcinfo, a++);
        in.payload = sender_arg(fcinfo, a++);
    }
    in.clock = clock_args(fcinfo, a, a + 1);
    PG_RETURN_BOOL(verdict_of(in) == idem::webhooks::Verdict::Valid);
}

// Copies a signature header into buf (inside run_cpp: throws when it does not fit); its length.
size_t copy_header(char *buf, size_t cap, const std::string &header) {
    if (header.size() > cap)
        throw std::runtime_error("signature longer than expected");
    memcpy(buf, header.data(), header.size());
    return header.size();
}

} // namespace

// idem_webhook_verify_standard(secrets text[], msg_id, msg_timestamp, payload, signature_header,
// tolerance, now) → boolean.
IDEM_PG_FUNCTION(idem_webhook_verify_standard) {
    return verify(fcinfo, false, true);
}

// The same with one secret (text).
IDEM_PG_FUNCTION(idem_webhook_verify_standard_1) {
    return verify(fcinfo, false, false);
}

// idem_webhook_verify_stripe(secrets text[], header, payload, tolerance, now) → boolean.
IDEM_PG_FUNCTION(idem_webhook_verify_stripe) {
    return verify(fcinfo, true, true);
}

// The same with one secret (text).
IDEM_PG_FUNCTION(idem_webhook_verify_stripe_1) {
    return verify(fcinfo, true, false);
}

// idem_webhook_sign_standard(secret, msg_id, msg_timestamp, payload) → 'v1,<base64>'.
IDEM_PG_FUNCTION(idem_webhook_sign_standard) {
    Bytes secret = bytes_arg(fcinfo, 0, "secret");
    Bytes msg_id = bytes_arg(fcinfo, 1, "msg_id");
    Bytes ts = bytes_arg(fcinfo, 2, "msg_timestamp");
    Bytes payload = bytes_arg(fcinfo, 3, "payload");
    char buf[128];
    size_t len = idem::pg::call_cpp([&] {
        return copy_header(
            buf, sizeof buf,
            idem::webhooks::sign_standard(std::string_view(secret.data, secret.len),
                                          std::string_view(msg_id.data, msg_id.len),
                                          std::string_view(ts.data, ts.len),
                                          std::string_view(payload.data, payload.len)));
    });
    PG_RETURN_TEXT_P(cstring_to_text_with_len(buf, static_cast<int>(len)));
}

// idem_webhook_sign_stripe(secret, msg_timestamp, payload) → 't=<ts>,v1=<hex>'.
IDEM_PG_FUNCTION(idem_webhook_sign_stripe) {
    Bytes secret = bytes_arg(fcinfo, 0, "secret");
    require_arg(fcinfo, 1, "msg_timestamp");
    int64 ts = PG_GETARG_INT64(1);
    Bytes payload = bytes_arg(fcinfo, 2, "payload");
    char buf[128];
    size_t len = idem::pg::call_cpp([&] {
        return copy_header(
            buf, sizeof buf,
            idem::webhooks::sign_stripe(std::string_view(secret.data, secret.len), ts,
                                        std::string_view(payload.data, payload.len)));
    });
    PG_RETURN_TEXT_P(cstring_to_text_with_len(buf, static_cast<int>(len)));
}

namespace {

// Argument positions of idem_webhook_receive.
enum ReceiveArg {
    A_CONSUMER,
    A_SCHEME,
    A_SECRETS,
    A_EVENT_ID,
    A_PAYLOAD,
    A_HEADER,
    A_TIMESTAMP,
    A_TYPE,
    A_ENQUEUE,
    A_ENTITY_KEY,
    A_ENTITY_SEQ,
    A_TOLERANCE,
    A_TTL,
    A_NOW
};

// A Standard Webhooks id the inbox cannot record is refused by the verification itself.
static_assert(idem::webhooks::max_msg_id_bytes == idem::pg::inbox::MAX_EVENT_ID,
              "webhook-id limit and inbox event id limit differ");

// True when the event id can be recorded: 1 to 1024 bytes. A delivery whose id cannot be
// recorded is answered invalid_event_id (nothing written) once its headers have passed, before
// any HMAC (stripe: the id the receiver read from the body; standard: the verification itself
// refuses such a webhook-id as an invalid signature).
bool event_id_usable(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(A_EVENT_ID))
        return false;
    Bytes id = varlena_bytes(PG_GETARG_DATUM(A_EVENT_ID));
    return id.len > 0 && id.len <= idem::pg::inbox::MAX_EVENT_ID;
}

// The receiver's arguments of idem_webhook_receive, checked before anything the sender sent
// (so that a misconfigured receiver fails on its first delivery, whatever that delivery holds),
// and the sender's fields, read as they are (NULL: missing).
void receive_input(FunctionCallInfo fcinfo, Secrets *secrets, VerifyInput *in) {
    constexpr const char *consumer_hint =
        "Name the inbox consumer that receives these webhooks, such as 'stripe-billing'.";
    require_arg(fcinfo, A_CONSUMER, "consumer", consumer_hint);
    Bytes consumer = varlena_bytes(PG_GETARG_DATUM(A_CONSUMER));
    if (consumer.len == 0 || consumer.len > idem::pg::inbox::MAX_CONSUMER)
        ereport(ERROR,
                (errcode(consumer.len == 0 ? ERRCODE_INVALID_PARAMETER_VALUE
                                           : ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
                 errmsg(consumer.len == 0 ? "consumer must not be empty" : "consumer is too long"),
                 errdetail("consumer has %zu bytes; it must have 1 to %zu.", consumer.len,
                           idem::pg::inbox::MAX_CONSUMER),
                 errhint("%s", consumer_hint)));
    idem::pg::tenants::check(idem::pg::tenants::CONSUMER, PG_GETARG_DATUM(A_CONSUMER));
    require_arg(fcinfo, A_SCHEME, "scheme", "Use 'standard' (Standard Webhooks) or 'stripe'.");
    char *scheme = TextDatumGetCString(PG_GETARG_DATUM(A_SCHEME));
    bool stripe = strcmp(scheme, "stripe") == 0;
    if (!stripe && strcmp(scheme, "standard") != 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("unknown webhook scheme \"%s\"", scheme),
                        errhint("Use 'standard' (Standard Webhooks) or 'stripe' (t=...,v1=...).")));
    secrets_arg(fcinfo, A_SECRETS, true, secrets);
    if (stripe && !PG_ARGISNULL(A_TIMESTAMP))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("msg_timestamp is not used by the stripe scheme"),
                        errdetail("The signed timestamp is the t= item of the header."),
                        errhint("Pass msg_timestamp => NULL with scheme 'stripe'.")));
    (void)idem::pg::inbox::positive_interval_arg(fcinfo, A_TTL, idem::settings::inbox_ttl_s, "ttl",
                                                 "idempotency.inbox_ttl");
    in->stripe = stripe;
    in->secrets = secrets;
    in->clock = clock_args(fcinfo, A_TOLERANCE, A_NOW);
    in->msg_id = sender_arg(fcinfo, A_EVENT_ID);
    in->payload = sender_arg(fcinfo, A_PAYLOAD);
    in->header = sender_arg(fcinfo, A_HEADER);
    in->timestamp = stripe ? Bytes{nullptr, 0} : sender_arg(fcinfo, A_TIMESTAMP);
    in->event_id_usable = event_id_usable(fcinfo);
}

// Records a verified event with idem_inbox_receive. The payload hash is the SHA-256 of the raw
// body; an inline event keeps only the hash.
Datum record_event(FunctionCallInfo fcinfo, Bytes payload) {
    idem::Digest digest = idem::pg::call_cpp(
        [&] { return idem::sha256(std::string_view(payload.data, payload.len)); });
    bytea *hash = idem::pg::copy_bytea(digest.data(), digest.size());
    bool enqueue = PG_ARGISNULL(A_ENQUEUE) ? false : PG_GETARG_BOOL(A_ENQUEUE);
    LOCAL_FCINFO(inner, 9);
    InitFunctionCallInfoData(*inner, nullptr, 9, PG_GET_COLLATION(), nullptr, nullptr);
    auto set = [&](int i, int from_arg, Datum v) {
        bool isnull = from_arg >= 0 && PG_ARGISNULL(from_arg);
        inner->args[i].value = isnull ? (Datum)0 : v;
        inner->args[i].isnull = isnull;
    };
    set(0, A_CONSUMER, PG_GETARG_DATUM(A_CONSUMER));
    set(1, A_EVENT_ID, PG_GETARG_DATUM(A_EVENT_ID));
    set(2, -1, PointerGetDatum(hash));
    set(3, -1, BoolGetDatum(enqueue));
    set(4, A_TYPE, PG_ARGISNULL(A_TYPE) ? (Datum)0 : PG_GETARG_DATUM(A_TYPE));
    set(5, enqueue ? A_PAYLOAD : -1, PG_GETARG_DATUM(A_PAYLOAD));
    if (!enqueue)
        inner->args[5].isnull = true; // inline events keep only the hash
    set(6, A_ENTITY_KEY, PG_ARGISNULL(A_ENTITY_KEY) ? (Datum)0 : PG_GETARG_DATUM(A_ENTITY_KEY));
    set(7, A_ENTITY_SEQ, PG_ARGISNULL(A_ENTITY_SEQ) ? (Datum)0 : PG_GETARG_DATUM(A_ENTITY_SEQ));
    set(8, A_TTL, PG_ARGISNULL(A_TTL) ? (Datum)0 : PG_GETARG_DATUM(A_TTL));
    return idem_inbox_receive(inner);
}

} // namespace

// idem_webhook_receive(consumer, scheme, secrets, event_id, payload, signature_header,
// msg_timestamp, event_type, enqueue, entity_key, entity_seq, tolerance, ttl, now): verifies
// and then records the event with idem_inbox_receive; a refused delivery writes nothing.
IDEM_PG_FUNCTION(idem_webhook_receive) {
    Secrets secrets;
    VerifyInput in{};
    receive_input(fcinfo, &secrets, &in);
    idem::webhooks::Verdict verdict = verdict_of(in);
    if (verdict != idem::webhooks::Verdict::Valid)
        PG_RETURN_TEXT_P(cstring_to_text(IDEM_NOTHROW(idem::webhooks::verdict_name(verdict))));
    return record_event(fcinfo, in.payload);
}
