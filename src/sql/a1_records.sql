
-- idem_claim's planner support (0.7) ------------------------------------------------------------
-- The planner fills a call's omitted arguments with their defaults, and every execution of the
-- plan then evaluates them. idem_claim_support (src/records_claim_support.cpp) drops the
-- trailing ones that are at their defaults; idem_claim takes an absent argument as its default.
-- A support function is set by a superuser, as CREATE EXTENSION idempotency is run.
CREATE FUNCTION idem_claim_support(internal) RETURNS internal
AS 'MODULE_PATHNAME', 'idem_claim_support' LANGUAGE C STRICT;
COMMENT ON FUNCTION idem_claim_support(internal) IS
    'Planner support of idem_claim: drops the trailing arguments at their defaults from the plan (fewer expressions to evaluate per call).';
-- The planner calls a support function without an EXECUTE check: PUBLIC needs no grant.
REVOKE EXECUTE ON FUNCTION idem_claim_support(internal) FROM PUBLIC;
ALTER FUNCTION idem_claim(text, text, bytea, interval, interval, boolean)
    SUPPORT idem_claim_support;
