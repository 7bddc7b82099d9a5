-- What an application does: the business change and its event commit
-- together, or neither does.
CREATE TABLE IF NOT EXISTS public.orders (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer_id text    NOT NULL,
    total_cents bigint  NOT NULL,
    status      text    NOT NULL DEFAULT 'created'
);

-- 1. Business row + outbox row in one transaction.
BEGIN;
WITH o AS (
    INSERT INTO public.orders (customer_id, total_cents) VALUES ('c-42', 1999) RETURNING id
)
INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', o.id::text, 'OrderCreated',
       jsonb_build_object('orderId', o.id, 'customerId', 'c-42', 'totalCents', 1999)
FROM o;
COMMIT;

-- 2. Insert-then-delete: the event is in the WAL (and so on Kafka) but the
-- outbox table stays empty, with no cleanup job. The DELETE is not
-- published (the publication publishes inserts only).
BEGIN;
UPDATE public.orders SET status = 'paid' WHERE customer_id = 'c-42';
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
VALUES ('6f1c2a9e-5d0b-4c39-9a57-3d2f1b8e7c41', 'order', 'c-42', 'OrderPaid', '{"customerId": "c-42"}');
DELETE FROM public.outbox WHERE id = '6f1c2a9e-5d0b-4c39-9a57-3d2f1b8e7c41';
COMMIT;
