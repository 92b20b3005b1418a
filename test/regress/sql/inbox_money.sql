-- The second layer for money: the inbox dedups by event id, but a provider may report one
-- payment in two different events (payment_intent.succeeded and charge.succeeded, or a
-- re-created event after an outage). A UNIQUE business key (the provider's payment id) and a
-- guarded state transition (PENDING -> PAID) give one effect whatever the event ids.
SET client_min_messages = warning;
CREATE TABLE m_orders (
    id     text PRIMARY KEY,
    status text NOT NULL CHECK (status IN ('PENDING', 'PAID')),
    amount integer NOT NULL
);
CREATE TABLE m_payments (
    provider_payment_id text PRIMARY KEY, -- the business key: one row per real payment
    order_id            text NOT NULL REFERENCES m_orders,
    amount              integer NOT NULL,
    event_id            text NOT NULL     -- the event that recorded it
);
CREATE TABLE m_licenses (
    order_id text PRIMARY KEY REFERENCES m_orders,
    key      text NOT NULL
);
CREATE TABLE m_refunds_needed (provider_payment_id text PRIMARY KEY, order_id text NOT NULL);

-- The consumer's handler: inbox first (layer 1), then the business key (layer 2), then the
-- state transition; all in the caller's transaction.
CREATE FUNCTION m_handle_payment(event_id text, payment_id text, order_id text, amount integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    outcome text;
BEGIN
    outcome := idempotency.idem_inbox_receive('m_billing', event_id,
                                  sha256(convert_to(payment_id || ':' || amount, 'UTF8')));
    IF outcome <> 'new' THEN
        RETURN 'event ' || outcome;
    END IF;
    INSERT INTO m_payments VALUES (payment_id, order_id, amount, event_id)
    ON CONFLICT (provider_payment_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'payment already recorded';
    END IF;
    UPDATE m_orders o SET status = 'PAID'
    WHERE o.id = order_id AND o.status = 'PENDING' AND o.amount = m_handle_payment.amount;
    IF NOT FOUND THEN
        -- a second, different payment for an order that is already paid: money to give back
        INSERT INTO m_refunds_needed VALUES (payment_id, order_id);
        RETURN 'order not pending: refund needed';
    END IF;
    INSERT INTO m_licenses VALUES (order_id, 'LIC-' || order_id);
    RETURN 'paid';
END $$;

INSERT INTO m_orders VALUES ('order-1', 'PENDING', 4200), ('order-2', 'PENDING', 990);

-- payment_intent.succeeded for pi_1
SELECT m_handle_payment('evt_A', 'pi_1', 'order-1', 4200);
-- the same event redelivered: layer 1
SELECT m_handle_payment('evt_A', 'pi_1', 'order-1', 4200);
-- charge.succeeded: a different event id about the same payment: layer 2
SELECT m_handle_payment('evt_B', 'pi_1', 'order-1', 4200);
-- the same event id with other content is never processed
SELECT m_handle_payment('evt_A', 'pi_9', 'order-1', 1);
-- a genuinely second payment for the paid order: no second PAID, flagged for a refund
SELECT m_handle_payment('evt_C', 'pi_2', 'order-1', 4200);
-- another order is unaffected
SELECT m_handle_payment('evt_D', 'pi_3', 'order-2', 990);

SELECT * FROM m_orders ORDER BY id;
SELECT * FROM m_payments ORDER BY provider_payment_id;
SELECT * FROM m_licenses ORDER BY order_id;
SELECT * FROM m_refunds_needed;
SELECT event_id, status FROM idempotency.inbox WHERE consumer = 'm_billing' ORDER BY event_id;

-- a failure after the inbox mark rolls both back: the redelivery is new and applies
INSERT INTO m_orders VALUES ('order-3', 'PENDING', 100);
ALTER TABLE m_licenses ADD CONSTRAINT no_order_3 CHECK (order_id <> 'order-3');
SELECT m_handle_payment('evt_E', 'pi_4', 'order-3', 100);
ALTER TABLE m_licenses DROP CONSTRAINT no_order_3;
SELECT m_handle_payment('evt_E', 'pi_4', 'order-3', 100);
SELECT o.id, o.status, count(l.*) AS licenses FROM m_orders o LEFT JOIN m_licenses l ON l.order_id = o.id
WHERE o.id = 'order-3' GROUP BY o.id, o.status;

DROP FUNCTION m_handle_payment(text, text, text, integer);
DROP TABLE m_refunds_needed, m_licenses, m_payments, m_orders;
