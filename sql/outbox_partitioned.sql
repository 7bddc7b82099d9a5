-- The outbox table of 001_outbox_table.sql, partitioned by range of
-- created_at (walrelay setup with outbox.partitioned=true): the same
-- columns, one partition per outbox.partition_interval. Old partitions are
-- detached and dropped whole instead of DELETEd row by row.
-- walrelay setup runs this with the configured postgres.table in place of
-- public.outbox.
--
-- A partitioned table's primary key must include the partition column, so
-- the key is (id, created_at): Postgres enforces id's uniqueness only
-- within one partition. Ids from gen_random_uuid() (the default) do not
-- collide; an application that sets id itself must not reuse one.
CREATE TABLE IF NOT EXISTS public.outbox (
    id            uuid         NOT NULL DEFAULT gen_random_uuid(), -- Kafka header "id": consumers dedupe on it
    aggregatetype varchar(255) NOT NULL,  -- routes the event: topic outbox.event.<aggregatetype>
    aggregateid   varchar(255) NOT NULL,  -- Kafka record key: one aggregate, one partition, commit order
    type          varchar(255) NOT NULL,  -- event type, e.g. OrderCreated
    payload       jsonb,                  -- Kafka record value, sent as the JSON text Postgres holds
    created_at    timestamptz  NOT NULL DEFAULT now(), -- when the event occurred; the partition key
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

-- Partitions: walrelay setup creates the one holding now() and
-- outbox.partitions_ahead more, and walrelay run keeps creating them ahead.
-- With the default daily interval they are named outbox_pYYYYMMDD and run
-- from one UTC midnight to the next, e.g.
--   CREATE TABLE IF NOT EXISTS public.outbox_p20261125 PARTITION OF public.outbox
--       FOR VALUES FROM ('2026-11-25 00:00:00+00') TO ('2026-11-26 00:00:00+00');
--
-- The publication must publish changes through the root, so that every
-- row arrives under public.outbox's name and new partitions are included:
--   CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox
--       WITH (publish = 'insert', publish_via_partition_root = true);
