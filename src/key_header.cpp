// idem_key_from_header: the key an Idempotency-Key header value carries (core/http_fields.hpp:
// the IETF draft's Structured Field string, and the unquoted form some clients send).
#include "pg_cpp.hpp"

#include "http_fields.hpp"
#include "lease.hpp"

// idem_key_from_header(value text) -> text: the key; 22023 for a malformed value, 22001 for a key
// that idem_claim would refuse as too long (over 255 bytes).
IDEM_PG_FUNCTION(idem_key_from_header) {
    text *v = PG_GETARG_TEXT_PP(0);
    std::string_view value(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
    text *out = static_cast<text *>(palloc(VARHDRSZ + value.size()));
    char *data = VARDATA(out);
    size_t n = idem::pg::call_cpp([&] {
        size_t len = idem::parse_key_header(value, data);
        idem::validate_name("key", len, idem::max_key_bytes);
        return len;
    });
    SET_VARSIZE(out, VARHDRSZ + n);
    PG_RETURN_TEXT_P(out);
}
