-- The logical replication slot walrelay reads from. Create it before the
-- application starts writing events: the slot keeps every change after its
-- creation point until walrelay confirms it.
-- Requires the REPLICATION attribute (or superuser). walrelay run also
-- creates it when postgres.create_slot is true (the default).
SELECT pg_create_logical_replication_slot('walrelay', 'pgoutput');
