-- The event cycle of queue_idem.sql through pgmq (bench/inbox.sh, part queue, the optional peer):
-- send, read one message with a 30 s visibility timeout, archive it (pgmq keeps archived
-- messages, as the inbox keeps done events), each statement its own transaction. pgmq does not
-- dedup: send has no event id to refuse a second delivery by.
SELECT pgmq.send('billing', '{"order":"o-1842","amount":4200,"currency":"EUR","customer":"c-77"}'::jsonb);
SELECT msg_id, message, read_ct FROM pgmq.read('billing', 30, 1) \gset
SELECT pgmq.archive('billing', :msg_id::bigint);
