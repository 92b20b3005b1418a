// The end of the HTTP contract (docs/records.md "The HTTP contract"; the begin is
// src/http_contract.cpp): idem_http_end stores the handler's answer when the contract says it is
// the request's result, with the allow-listed headers; idem_http_release releases an attempt
// whose answer is not stored. Both call idem_complete and idem_fail directly (records.hpp).
#include "arguments.hpp"
#include "records.hpp"

#include "http_answer.hpp"
#include "http_contract.hpp"

extern "C" {
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
}

namespace {

namespace http = idem::http;

// The headers idem_http_end stores and the Location among them.
struct Kept {
    bool any;
    Datum headers;
    bool has_location;
    std::string_view location;
};

std::string_view key_of(const JsonbValue &v) noexcept {
    return std::string_view(v.val.string.val, static_cast<size_t>(v.val.string.len));
}

// A header's value as a string, as jsonb_each_text gives it (a JSON null stays null).
JsonbValue as_string(const JsonbValue &v) {
    if (v.type == jbvString || v.type == jbvNull)
        return v;
    const char *s = nullptr;
    if (v.type == jbvNumeric)
        s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
    else if (v.type == jbvBool)
        s = v.val.boolean ? "true" : "false";
    else // a container (jbvBinary)
        s = JsonbToCString(nullptr, v.val.binary.data, v.val.binary.len);
    JsonbValue r;
    r.type = jbvString;
    r.val.string.val = const_cast<char *>(s);
    r.val.string.len = static_cast<int>(strlen(s));
    return r;
}

// The handler's headers (argument 4, a JSON object) that the allow-list (argument 7) names, in
// any case, each under the allow-list's spelling: one stored name for every package.
Kept kept_headers(FunctionCallInfo fcinfo) {
    Kept k{false, (Datum)0, false, {}};
    if (PG_ARGISNULL(4) || PG_ARGISNULL(7))
        return k;
    Jsonb *jb = PG_GETARG_JSONB_P(4);
    if (!JB_ROOT_IS_OBJECT(jb))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("idem_http_end: headers must be a JSON object of name to value")));
    Datum *names;
    bool *name_nulls;
    int count;
    deconstruct_array(PG_GETARG_ARRAYTYPE_P(7), TEXTOID, -1, false, TYPALIGN_INT, &names,
                      &name_nulls, &count);
    JsonbParseState *st = nullptr;
    pushJsonbValue(&st, WJB_BEGIN_OBJECT, nullptr);
    JsonbIterator *it = JsonbIteratorInit(&jb->root);
    JsonbValue key, value;
    JsonbIteratorToken tok;
    while ((tok = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
        if (tok != WJB_KEY)
            continue;
        JsonbIteratorNext(&it, &value, true);
        for (int i = 0; i < count; i++) {
            if (name_nulls[i])
                continue;
            text *name = DatumGetTextPP(names[i]);
            std::string_view allowed(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
            if (!IDEM_NOTHROW(http::header_name_equal(key_of(key), allowed)))
                continue;
            JsonbValue stored_name;
            stored_name.type = jbvString;
            stored_name.val.string.val = const_cast<char *>(allowed.data());
            stored_name.val.string.len = static_cast<int>(allowed.size());
            JsonbValue v = as_string(value);
            pushJsonbValue(&st, WJB_KEY, &stored_name);
            pushJsonbValue(&st, WJB_VALUE, &v);
            k.any = true;
            if (v.type == jbvString && IDEM_NOTHROW(http::header_name_equal(allowed, "Location"))) {
                k.has_location = true;
                k.location = key_of(v);
            }
        }
    }
    if (k.any)
        k.headers = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, nullptr)));
    return k;
}

// The resource id: the argument, else the last path segment of the stored Location.
bool resource_id(FunctionCallInfo fcinfo, const Kept &k, Datum *out) {
    if (!PG_ARGISNULL(6)) {
        *out = PG_GETARG_DATUM(6);
        return true;
    }
    if (!k.has_location)
        return false;
    std::string_view id = IDEM_NOTHROW(http::location_resource_id(k.location));
    if (id.empty())
        return false;
    *out = PointerGetDatum(cstring_to_text_with_len(id.data(), static_cast<int>(id.size())));
    return true;
}

// Calls fn (idem_complete or idem_fail) with 8 arguments.
bool call8(PGFunction fn, const Datum *args, const bool *nulls) {
    LOCAL_FCINFO(c, 8);
    InitFunctionCallInfoData(*c, nullptr, 8, InvalidOid, nullptr, nullptr);
    for (int i = 0; i < 8; i++) {
        c->args[i].value = args[i];
        c->args[i].isnull = nulls[i];
    }
    return DatumGetBool(fn(c));
}

// A processing record of this attempt, locked until the end of the transaction, so that the
// release cannot race with a takeover (under READ COMMITTED a concurrent change is waited for
// and the row re-checked).
const char *const SQL_HELD = "SELECT 1 FROM idempotency.records r" WHERE_KEY
                             " AND r.status OPERATOR(pg_catalog.=) 'processing'::pg_catalog.text"
                             " AND r.attempt OPERATOR(pg_catalog.=) $3 FOR UPDATE";
const Oid HELD_TYPES[] = {TEXTOID, TEXTOID, INT4OID};
SPIPlanPtr plan_held;

} // namespace

// idem_http_end(scope, key, attempt, status, headers, body, resource_id, stored_headers) ->
// boolean: true when the answer is stored (commit), false when it is not (roll back, release).
IDEM_PG_FUNCTION(idem_http_end) {
    int32 status = PG_ARGISNULL(3) ? 0 : PG_GETARG_INT32(3);
    if (PG_ARGISNULL(3) || status < 100 || status > 599)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("idem_http_end: %s is not an HTTP status",
                               PG_ARGISNULL(3) ? "NULL" : psprintf("%d", status))));
    if (!IDEM_NOTHROW(http::stored_status(status)))
        PG_RETURN_BOOL(false); // roll back, then idem_http_release
    Kept k = kept_headers(fcinfo);
    Datum rid = (Datum)0;
    bool rid_null = !resource_id(fcinfo, k, &rid);
    Datum args[8] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1),    PG_GETARG_DATUM(2), rid,
                     (Datum)0,           Int32GetDatum(status), PG_GETARG_DATUM(5), k.headers};
    bool nulls[8] = {PG_ARGISNULL(0), PG_ARGISNULL(1), PG_ARGISNULL(2), rid_null, true,
                     false,           PG_ARGISNULL(5), !k.any};
    call8(idem_complete, args, nulls);
    PG_RETURN_BOOL(true);
}

// idem_http_release(scope, key, attempt) -> boolean: after the request's transaction rolled back,
// a processing record of this attempt (two-phase mode) becomes failed and retryable; false when
// there is none (single-transaction mode: the claim rolled back too; or another attempt took the
// key over or finished it meanwhile: not ours to release).
IDEM_PG_FUNCTION(idem_http_release) {
    Datum keyv[3];
    idem::pg::records::scope_key_args(fcinfo, &keyv[0], &keyv[1]);
    int32 attempt = idem::pg::records::attempt_arg(fcinfo, 2);
    keyv[2] = Int32GetDatum(attempt);
    idem::pg::SavedUser su;
    idem::pg::enter(&su);
    idem::pg::saved_plan(&plan_held, SQL_HELD, 3, HELD_TYPES);
    uint64 held = idem::pg::exec(plan_held, keyv, nullptr, false, 1);
    idem::pg::leave(&su);
    if (held == 0)
        PG_RETURN_BOOL(false);
    Datum args[8] = {keyv[0], keyv[1], keyv[2], BoolGetDatum(true), 0, 0, 0, 0};
    bool nulls[8] = {false, false, false, false, true, true, true, true};
    PG_RETURN_BOOL(call8(idem_fail, args, nulls));
}
