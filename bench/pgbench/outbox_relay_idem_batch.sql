-- One relay cycle with the batch form of done (bench/outbox.sh, part relay): lease a batch of 100
-- with idem_outbox_next and mark it done with one idem_outbox_done_batch over the arrays of its event ids
-- and attempts, in one transaction (this statement).
WITH n AS (SELECT event_id, attempt FROM idempotency.idem_outbox_next('orders', 100))
SELECT count(*) FROM idempotency.idem_outbox_done_batch(ARRAY(SELECT event_id FROM n), ARRAY(SELECT attempt FROM n));
