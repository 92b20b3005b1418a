
-- Lifecycle: idem_inbox_stats counts queued and leased events whatever their age ---------------
-- 0.2's view counted a queued or leased event past its TTL as expired ("awaiting the purge") and
-- no longer as received, pending or processing, nor in oldest_pending_age. But such an event
-- never expires: the purge never deletes it, idem_inbox_next still hands it out, a redelivery is
-- still a duplicate (docs/inbox.md "Retention"). It is now counted as pending, like any other
-- queued or leased event, and expired holds exactly the finished entries (done, failed, stale)
-- past their TTL, the ones the purge deletes (docs/operations.md "Which state is counted where").
-- CREATE OR REPLACE keeps the view's columns, its grants (pg_monitor, nothing for PUBLIC) and its
-- membership of the extension; the comment is restated to say what changed.
CREATE OR REPLACE VIEW idem_inbox_stats AS
SELECT i.consumer,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])
              OR i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS received,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])) AS pending,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'processing') AS processing,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'done'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS processed,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'failed'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS failed,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) 'stale'
             AND i.expires_at OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS stale,
       pg_catalog.count(*) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['done', 'failed', 'stale'])
             AND i.expires_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS expired,
       pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(i.received_at) FILTER (
           WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['received', 'processing'])) AS oldest_pending_age
FROM idempotency.inbox i
GROUP BY i.consumer;
COMMENT ON VIEW idem_inbox_stats IS
    'Inbox events per consumer: received (every event id recorded but the expired ones, duplicates are not rows), pending (queued or leased, whatever their age: they never expire), processing (leased, also when the lease ran out), processed (done), failed (dead), stale, expired (done, failed or stale past the TTL, awaiting purge), oldest_pending_age. Scans idempotency.inbox.';
