-- walrelay's own record of each replication slot it relays through (see
-- docs/DESIGN.md, "Retention"). Retention and walrelay verify trust a
-- slot's confirmed_flush_lsn only while it is at or before confirmed_lsn:
-- the relay writes a position here BEFORE it confirms it to the slot, so a
-- slot found past it (recreated, advanced by hand, replaced by a failover)
-- was moved by someone else, and the rows in between may never have been
-- published. walrelay setup creates this table in postgres.table's schema
-- (and walrelay run does when it may); walrelay setup runs this with that
-- schema in place of public.
CREATE TABLE IF NOT EXISTS public.walrelay_slot_positions (
    slot_name         text        PRIMARY KEY,
    system_identifier text        NOT NULL, -- pg_control_system(): the cluster the positions belong to
    confirmed_lsn     pg_lsn      NOT NULL, -- the relay confirms the slot only up to here (Kafka acknowledged all before it)
    created_lsn       pg_lsn,               -- where walrelay created the slot; NULL when it found it
    updated_at        timestamptz NOT NULL DEFAULT now(),
    note              text,                 -- the last deliberate move (slot advance, takeover, baseline)
    jumped_at         timestamptz,          -- set when the slot was found replaced or past confirmed_lsn: retention stops
    jump              text,                 -- what was found
    jumped_from_lsn   pg_lsn,               -- confirmed_lsn then: rows committed after it may be unpublished
    adopted_at        timestamptz,          -- walrelay slot adopt cleared the jump (after walrelay verify)
    adopted_by        text,
    timeline          bigint,               -- the WAL timeline the relay last recorded on (a promotion since is a failover)
    fence_xmin        bigint,               -- a fence (internal/txfence) taken while relaying, not yet covered by confirmed_lsn
    fence_lsn         pg_lsn,
    covered_xmin      bigint,               -- the newest fence confirmed_lsn passed: every row whose xmin precedes it is on Kafka
    covered_lsn       pg_lsn,               -- (walrelay heal republishes the outbox rows that do not precede it)
    covered_system    text,
    jump_accepted     boolean               -- the jump is a gap an operator accepted (walrelay slot create --accept-gap): walrelay run relays on
);

-- The run role of sql/004_role.sql records through it (004 grants this too
-- when the table exists first). walrelay setup runs only the CREATE TABLE
-- above.
DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'walrelay') THEN GRANT SELECT, INSERT, UPDATE ON public.walrelay_slot_positions TO walrelay; END IF; END $$;
