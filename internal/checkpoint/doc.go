// Package checkpoint decides which WAL position walrelay may confirm to Postgres.
//
// Role: it is the only source of the flush/apply/write positions that the
// replication package sends in standby status updates (DESIGN.md invariant 1), it
// computes the contiguous watermark over out-of-order Kafka acks (invariant 2),
// lets an idle stream advance to the server's WAL end (invariant 3), and bounds
// the records and bytes in flight (invariant 6).
//
// In: from the replication goroutine, one call per stream event — Begin (or
// BeginAt, with its commit time) at a transaction's Begin message, Add for every record of it handed to the
// producer, Commit with the Commit message's TransactionEndLSN, Abort when the
// stream broke before the Commit arrived, ObserveWALEnd with a keepalive's
// server WAL end, SetStart with the slot's confirmed_flush_lsn, Reset with
// it when the stream now reads another WAL history. From the producer's ack
// callbacks, on any goroutine, Ack for every record the broker durably
// acked.
//
// Out: Confirmed, the LSN that is safe to confirm; WaitRoom, the backpressure
// gate the replication goroutine passes before it reads more from the slot,
// and WaitRoomFor, which holds a message larger than the byte cap until
// nothing is in flight; WaitDrained for shutdown; InFlight and Pending for
// metrics and logs; Oldest, the commit time of the oldest transaction with a
// record not yet acknowledged, for the unpublished-event alarm.
//
// What it does not do: it does not talk to Postgres or Kafka, send status
// updates, retry, log, or register metrics (the caller exports InFlight and
// Pending); it does not know about records that failed to produce — a record
// that is never acked holds the watermark back forever, which is the safe
// failure (the relay must stop or dead-letter it, DESIGN.md invariant 4); and it
// never blocks in Add: the cap is enforced by the caller through WaitRoom.
//
// # Design
//
// One mutex guards all state. Committed transactions that still wait for
// acks sit in a ring buffer in commit order; each Tx counts its own unacked
// records, so Ack is a decrement plus, when that was the last record of the
// transaction at the front of the queue, popping every finished transaction
// off the front (amortized O(1) per transaction). A transaction whose records
// are all acked by its Commit (including one with no records) never enters
// the queue: with an empty queue it advances Confirmed at once, otherwise it
// is folded into the queue's tail, whose end LSN it raises, so that when the
// tail completes Confirmed jumps straight to the newest finished transaction.
// Tx handles are recycled through a small free list, so the steady state
// allocates nothing per transaction or per record. Confirmed is also stored in
// an atomic so that status updates do not contend for the mutex.
//
// Waiters (WaitRoom, WaitDrained) sleep on a channel created under the mutex
// when they find no room; Ack closes it under the same mutex once the awaited
// condition holds, so no wakeup is lost and no goroutine is started.
//
// # Abort
//
// A transaction whose Commit never arrived has no end LSN, so it confirms
// nothing. It is not part of the commit-order queue and does not hold back
// the watermark: after a stream break the replication package restarts from
// the slot, which is at most Confirmed, and Confirmed is at most the end of
// the last committed transaction before the aborted one. Postgres therefore
// sends the aborted transaction again, and the re-sent copy is tracked as a
// Tx of its own that must be fully acked before any LSN at or past its end is
// confirmed. The aborted copy's records are duplicates (delivery is
// at-least-once) whose loss would lose nothing, so waiting for them before
// confirming later transactions would protect nothing; if they are never
// acked they would instead stall the watermark forever. They do stay counted
// in InFlight until acked — that memory is really in use — which also keeps
// ObserveWALEnd from treating the tracker as idle and keeps WaitDrained
// waiting for them. Committed transactions queued before the aborted one are
// unaffected: they were committed and are confirmed once acked.
//
// # Contract
//
// Begin, BeginAt, Add, Commit, Abort, ObserveWALEnd, SetStart and Reset are
// called from the replication goroutine; Ack from any goroutine; Confirmed,
// InFlight, Pending, Oldest, WaitRoom, WaitRoomFor and WaitDrained from any
// goroutine. Add must be called before the
// record is handed to the producer, and Ack exactly once per Add with the
// same byte count. A Tx must not be used by the replication goroutine after
// Commit or Abort, nor by anyone after the Ack of its last record once it is
// committed or aborted: the handle is then recycled. Violations that the
// tracker can detect cheaply — more Acks than Adds, Add or Commit on a Tx that
// is not open, byte counts that do not add up, Reset while anything is
// tracked — panic with a message starting
// with "checkpoint:", because continuing could confirm unacked WAL.
package checkpoint
