// Package replication is walrelay's logical replication client: it streams
// pgoutput (proto_version 1) from one replication slot and hands every decoded
// message, in WAL order, to a Handler.
//
// In: a DSN, a slot name and publication names. Out: calls on a Handler
// (Begin, Relation, Insert, Update, Delete, Truncate, Message, Commit) from a
// single goroutine, and standby status updates to Postgres.
//
// The positions it reports to Postgres come only from a Checkpointer (DESIGN.md
// invariant 1): write, flush and apply are all set to Checkpointer.Confirmed,
// never to the received position, so Postgres keeps the WAL of everything the
// broker has not acknowledged. Keepalives are passed to
// Checkpointer.ObserveWALEnd, which may confirm the server's WAL end when
// nothing is in flight, so an idle outbox does not pin WAL; a Handler that is
// a WALEndHandler may hold them back (walrelay does while a checkpoint it
// skips by is not yet proven on this WAL). Keepalives received inside a
// transaction are not passed on; every session starts outside one.
//
// Each session starts by identifying the server on its own connection
// (IDENTIFY_SYSTEM: system id, timeline, WAL position) and reading the slot's
// confirmed_flush_lsn, and hands both to Handler.SessionStart before it starts
// replication and before it sends any status update: the Handler decides
// what its position means on this server (the same WAL history as the last
// session, or another one after a failover or a restore). Once
// START_REPLICATION succeeded, and the session holds the slot, it calls
// Handler.SessionStreaming, before reading the first message. A slot another
// process streams from fails the session (ErrSlotActive) and is retried.
//
// The stream keeps the relation cache (Relation messages precede the first
// row of a table in each session), answers keepalives that ask for a reply,
// pauses reading while the Checkpointer reports no room (backpressure: the
// WAL stays in Postgres, not in walrelay's memory), and reconnects with
// exponential backoff after a lost connection, resuming from the slot's
// confirmed position; a Handler restarts the session the same way by
// returning ErrRestartSession, and any goroutine by calling EndSession
// (walrelay does when Postgres shuts down and the slot's position cannot
// be recorded: a walsender at shutdown waits for its client's position, or
// for its connection to close). A Handler that is a ReplyHandler hears of
// the keepalives that ask for a reply. A Handler that waits (for a schema registry
// that is down) keeps its session alive with KeepAlive, which sends status
// updates from within the Handler call without reading. On shutdown it stops reading, waits (bounded) for the
// Checkpointer to drain, reports the final confirmed position and closes.
//
// The bytes of the replication connection (the hijacked socket, framing,
// receive buffers, batched reads) are internal/pgwire's; this package
// connects, identifies the server, decodes pgoutput and dispatches.
//
// It does not route, publish or track acknowledgements: that is the
// Handler's and the Checkpointer's job. It does not create slots or
// publications.
package replication
