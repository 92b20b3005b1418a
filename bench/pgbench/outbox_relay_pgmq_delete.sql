-- The relay cycle through pgmq deleting instead of archiving (nothing kept): read a batch of 100
-- with a 30 s visibility timeout and delete it with one call over the array of its ids.
SELECT count(*) FROM pgmq.delete('orders', ARRAY(SELECT m.msg_id FROM pgmq.read('orders', 30, 100) m));
