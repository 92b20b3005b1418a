// idem_key_from_header: the key an Idempotency-Key header value carries (core/http_fields.hpp:
// the IETF draft's Structured Field string, and the unquoted form some clients send).
#include "key_header.hpp"

#include "http_fields.hpp"
#include "lease.hpp"

// (key_header.hpp)
bool idem::pg::key_header::parse(Datum header, Datum *key, PendingError *pe) {
    text *v = DatumGetTextPP(header);
    std::string_view value(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
    text *out = static_cast<text *>(palloc(VARHDRSZ + value.size()));
    char *data = VARDATA(out);
    size_t n = 0;
    if (!run_cpp(*pe, [&] {
            n = idem::parse_key_header(value, data);
            idem::validate_name("key", n, idem::max_key_bytes);
        }))
        return false;
    SET_VARSIZE(out, VARHDRSZ + n);
    *key = PointerGetDatum(out);
    return true;
}

// idem_key_from_header(value text) -> text: the key; 22023 for a malformed value, 22001 for a key
// that idem_claim would refuse as too long (over 255 bytes).
IDEM_PG_FUNCTION(idem_key_from_header) {
    idem::pg::PendingError pe;
    Datum key;
    if (!idem::pg::key_header::parse(PG_GETARG_DATUM(0), &key, &pe))
        idem::pg::raise(pe);
    PG_RETURN_DATUM(key);
}
