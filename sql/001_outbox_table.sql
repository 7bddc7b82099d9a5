-- The outbox table, with Debezium's default column names, so the Outbox
-- Event Router defaults (and existing Debezium configs) apply unchanged.
-- walrelay setup runs this with the configured postgres.table in place of
-- public.outbox.
CREATE TABLE IF NOT EXISTS public.outbox (
    id            uuid         PRIMARY KEY DEFAULT gen_random_uuid(), -- Kafka header "id": consumers dedupe on it
    aggregatetype varchar(255) NOT NULL,  -- routes the event: topic outbox.event.<aggregatetype>
    aggregateid   varchar(255) NOT NULL,  -- Kafka record key: one aggregate, one partition, commit order
    type          varchar(255) NOT NULL,  -- event type, e.g. OrderCreated
    payload       jsonb,                  -- Kafka record value, sent as the JSON text Postgres holds
    created_at    timestamptz  NOT NULL DEFAULT now() -- when the event occurred
);
