
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

-- UUIDv7, HMAC and constant-time comparison ----------------------------------------------------

CREATE FUNCTION idem_uuid_v7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'idem_uuid_v7' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_uuid_v7() IS
    'A new RFC 9562 version-7 UUID (Unix milliseconds + sequence + 62 random bits), strictly increasing within the session.';

CREATE FUNCTION idem_uuid_v7_time(id uuid)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_uuid_v7_time' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_uuid_v7_time(uuid) IS
    'The millisecond timestamp embedded in a version-7 UUID; error 22023 for other UUIDs.';

CREATE FUNCTION idem_hmac_sha256(key bytea, message bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_hmac_sha256' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_hmac_sha256(bytea, bytea) IS
    'HMAC-SHA256 (RFC 2104, FIPS 180-4) of message under key, 32 bytes.';

CREATE FUNCTION idem_secure_equal(a bytea, b bytea)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_secure_equal' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_secure_equal(bytea, bytea) IS
    'Compares two byte strings in time that depends only on their lengths (for signatures and tokens).';
