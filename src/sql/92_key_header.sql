
-- The Idempotency-Key header (0.6) ----------------------------------------------------------------
CREATE FUNCTION idem_key_from_header(value text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_key_from_header' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_key_from_header(text) IS
    'The key an Idempotency-Key header value carries: an RFC 8941 Structured Field string ("k", the IETF draft''s form; parameters ignored) or an unquoted key (k), the same key either way; 22023 for a malformed value.';
