-- One event through the queued inbox (bench/inbox.sh, part queue): a producer's delivery, then a
-- worker's cycle on the oldest queued event, each statement its own transaction as in
-- docs/inbox.md (receive and acknowledge; next in a short transaction; done with the effect).
-- The queue holds a backlog, so next always finds an event; done takes the attempt next gave.
\set k random(1, 9000000000000000000)
SELECT idempotency.idem_inbox_receive('billing', 'q' || :k, enqueue => true, event_type => 'order.paid',
                          payload => '\x7b226f72646572223a226f2d31383432222c22616d6f756e74223a343230302c2263757272656e6379223a22455552222c22637573746f6d6572223a22632d3737227d'::bytea);
SELECT event_id, event_type, payload, attempt FROM idempotency.idem_inbox_next('billing', 1) \gset
SELECT idempotency.idem_inbox_done('billing', :event_id, :attempt);
