-- A least-privilege role for walrelay run: REPLICATION to stream from the
-- slot, SELECT on the outbox and nothing else. It cannot write to any
-- table. Set the password out of band (\password walrelay in psql) and
-- pass it through the DSN or WALRELAY_POSTGRES_DSN, never in this file.
-- The DSN must allow replication connections for this role in pg_hba.conf
-- (a "host <db> walrelay ..." line also covers replication=database).
CREATE ROLE walrelay WITH LOGIN REPLICATION;
GRANT USAGE ON SCHEMA public TO walrelay;
GRANT SELECT ON public.outbox TO walrelay;
-- walrelay setup additionally needs to create the table and the
-- publication (table ownership) and the slot (REPLICATION); a DBA can run
-- 001-003 by hand instead and keep walrelay on this role.
-- walrelay run records the positions it confirms in the table of
-- sql/005_slot_positions.sql before it confirms them; without this grant it
-- relays, but retention stays stopped (no record proves the slot's
-- position). When the table does not exist yet, 005 grants it instead.
DO $$ BEGIN IF to_regclass('public.walrelay_slot_positions') IS NOT NULL THEN GRANT SELECT, INSERT, UPDATE ON public.walrelay_slot_positions TO walrelay; END IF; END $$;
