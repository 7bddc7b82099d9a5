-- The publication walrelay streams: the outbox table, INSERTs only.
-- UPDATEs and DELETEs of outbox rows (e.g. insert-then-delete in the same
-- transaction to keep the table empty) are not published at all.
-- Creating a publication requires owning the table.
CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox WITH (publish = 'insert');
