
-- Webhooks (issue 18) --------------------------------------------------------------------------
-- idem_webhook_receive answers one more outcome: invalid_event_id, an authentic delivery whose
-- event id cannot be recorded (NULL, empty, longer than 1024 bytes), where it raised 22004 /
-- 22023 / 22001 before. What the sender controls never raises (src/webhooks.cpp).
COMMENT ON FUNCTION idem_webhook_receive(text, text, text[], text, bytea, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook (scheme standard | stripe) and records it in the inbox with the SHA-256 of the payload as its hash. outcome: invalid_signature | stale_timestamp | invalid_event_id (nothing written) | new | duplicate | mismatch | stale. What the sender controls never raises.';
COMMENT ON FUNCTION idem_webhook_receive(text, text, text[], text, text, text, text, text, boolean, text, bigint, interval, interval, timestamptz) IS
    'Verifies a webhook and records it in the inbox; payload given as text, signed and stored as its raw bytes. outcome as for the bytea form.';
