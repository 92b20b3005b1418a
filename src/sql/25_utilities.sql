
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
