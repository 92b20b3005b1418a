
-- Request fingerprints (RFC 8785 JSON Canonicalization Scheme + SHA-256) ---------------------

CREATE FUNCTION idem_canonical_json(doc jsonb, exact_numbers boolean DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical_json_jsonb' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_canonical_json(jsonb, boolean) IS
    'RFC 8785 (JCS) canonical text of a jsonb value; exact_numbers keeps every decimal digit instead of IEEE-754 doubles.';

CREATE FUNCTION idem_canonical_json(doc text, exact_numbers boolean DEFAULT false)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical_json_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_canonical_json(text, boolean) IS
    'RFC 8785 (JCS) canonical text of raw JSON text, parsed strictly as I-JSON (no duplicate names, lone surrogates, NaN/Infinity or invalid UTF-8).';

CREATE FUNCTION idem_fingerprint(doc jsonb, exclude text[] DEFAULT NULL,
                                 include text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_jsonb' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_fingerprint(jsonb, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of a jsonb request after dropping the exclude paths and keeping only the include paths; NULL for a NULL document.';

CREATE FUNCTION idem_fingerprint(doc text, exclude text[] DEFAULT NULL,
                                 include text[] DEFAULT NULL,
                                 exact_numbers boolean DEFAULT false)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint_text' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_fingerprint(text, text[], text[], boolean) IS
    'SHA-256 (32 bytes) of the RFC 8785 canonical form of raw JSON text (strict I-JSON) after the exclude/include path filters; NULL for a NULL document.';
