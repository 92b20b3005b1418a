-- The relay cycle through pgmq (bench/outbox.sh, part relay, the optional peer): read a batch of
-- 100 with a 30 s visibility timeout and archive it with one call over the array of its ids (pgmq
-- keeps archived messages, as the outbox keeps done events), in one transaction (this statement).
SELECT count(*) FROM pgmq.archive('orders', ARRAY(SELECT m.msg_id FROM pgmq.read('orders', 30, 100) m));
