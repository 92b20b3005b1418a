-- One relay cycle (bench/outbox.sh, part relay): lease a batch of 100 with idem_outbox_next and
-- mark each event done with the attempt next gave, all in one transaction (this statement).
SELECT count(idempotency.idem_outbox_done(n.event_id, n.attempt)) FROM idempotency.idem_outbox_next('orders', 100) n;
