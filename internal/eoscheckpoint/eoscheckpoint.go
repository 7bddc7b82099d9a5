// Package eoscheckpoint is the record that exactly-once delivery
// (relay.delivery=exactly_once) writes into every Kafka transaction, next
// to the events of that transaction: how far into the slot's WAL the
// events on Kafka go. It commits or aborts with them, so a read_committed
// reader of the checkpoint topic sees the position of exactly the events
// a read_committed consumer sees.
//
// In: a position to write, or the checkpoint topic to read. Out: the
// record's bytes, or the last committed checkpoint of a key. The key is
// the relay's transactional id; the value is JSON, readable with any
// Kafka client:
//
//	{"version":1,"lsn":"0/16B3748","system_id":"7312…","timeline":1,
//	 "database":"app","slot":"walrelay",
//	 "last":{"commit_lsn":"0/16B3718","xid":811,"commit_time":"2026-11-24T21:58:03.101234Z"},
//	 "open":{"commit_lsn":"0/16B9000","xid":812,"rows":4096,"commit_time":"2026-11-24T21:58:03.110009Z"},
//	 "written_at":"2026-11-24T21:58:03.120Z"}
//
// lsn is the end LSN (pgoutput's TransactionEndLSN) of the last Postgres
// transaction whose events are all on Kafka; every transaction whose
// commit LSN is below it is published. last, when present, names that
// transaction as its Begin message does: its commit LSN (FinalLSN), xid
// and commit time; it is absent when the relay does not know it (lsn is a
// slot's position it started from, or the checkpoint was written by a
// walrelay older than the field, which still parses). A relay proves with
// it that lsn belongs to the WAL it streams: the slot must send that
// transaction again, with that commit LSN, xid and commit time, ending at
// lsn (internal/relay; a server restored from a snapshot of the same timeline
// keeps system_id and timeline but not its transactions). open, when present, is a Postgres
// transaction published in part, because it was larger than a Kafka
// transaction may be (named as last is, its commit time when known): its first rows events (outbox INSERTs and the
// table-less outbox's logical messages, in WAL order, counted as the
// relay hands them on: produced, dead-lettered or skipped by policy) are
// on Kafka.
// LSNs mean something only on the WAL history of system_id and timeline.
//
// History returns the earlier checkpoints of a key the topic still holds,
// which a relay proves on the WAL by their own last transactions.
//
// It does not decide what to skip: internal/relay does (docs/DESIGN.md,
// "Exactly-once delivery").
package eoscheckpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkalog"
)

// Version is the value format written; Parse refuses others.
const Version = 1

// ErrNoTopic is returned (wrapped) by Read when the topic does not exist.
var ErrNoTopic = kafkalog.ErrNoTopic

// ErrHeld is returned (wrapped) by Read when ctx ends while a transaction
// still open on the topic (another deployment's, on a checkpoint topic
// they share) hides records written before the read began: what Read
// would return could be an older checkpoint than the last committed one.
// The error names the partition, its offsets and, when the broker tells,
// the open transaction's producer, and what to do.
var ErrHeld = kafkalog.ErrHeld

// ErrUnreadable is returned (wrapped) by Read when the last record of the
// key does not parse: not JSON, a version this walrelay does not read (a
// checkpoint of a newer walrelay, after a downgrade), or a field out of
// range. Trying again reads the same record: the caller must stop. The
// error names the record (topic, partition, offset, key, the value's
// first bytes) and the fixes: run the walrelay version that wrote it, or
// delete the checkpoint with a tombstone (what it covered beyond the
// slot's position may then be published again).
var ErrUnreadable = errors.New("checkpoint unreadable")

// Checkpoint is the position one Kafka transaction committed.
type Checkpoint struct {
	// LSN is the end LSN of the last whole Postgres transaction published.
	LSN pglogrepl.LSN
	// SystemID and Timeline name the WAL history LSN belongs to.
	SystemID string
	Timeline int32
	// Database and Slot are where the events came from (informational).
	Database, Slot string
	// Last is the Postgres transaction whose end LSN is LSN; nil when
	// unknown.
	Last *Last
	// Open is the Postgres transaction after LSN published in part; nil
	// when none is.
	Open *Open
	// Written is when the relay wrote it.
	Written time.Time
}

// Open is a Postgres transaction of which the first Rows events (INSERTs
// and table-less outbox messages, in WAL order) are published.
type Open struct {
	CommitLSN pglogrepl.LSN // its commit LSN (the Begin message's FinalLSN)
	Xid       uint32
	Rows      int
	// CommitTime is its commit timestamp; zero when unknown (not written,
	// and absent from checkpoints of a walrelay older than the field).
	CommitTime time.Time
}

// Last names a Postgres transaction as its Begin message does.
type Last struct {
	CommitLSN pglogrepl.LSN // its commit LSN (the Begin message's FinalLSN)
	Xid       uint32
	// CommitTime is its commit timestamp; zero when unknown (not written).
	CommitTime time.Time
}

type wire struct {
	Version  int       `json:"version"`
	LSN      string    `json:"lsn"`
	SystemID string    `json:"system_id"`
	Timeline int32     `json:"timeline"`
	Database string    `json:"database,omitempty"`
	Slot     string    `json:"slot,omitempty"`
	Last     *wireLast `json:"last,omitempty"`
	Open     *wireOpen `json:"open,omitempty"`
	Written  time.Time `json:"written_at"`
}

type wireLast struct {
	CommitLSN  string    `json:"commit_lsn"`
	Xid        uint32    `json:"xid"`
	CommitTime time.Time `json:"commit_time,omitzero"`
}

type wireOpen struct {
	CommitLSN  string    `json:"commit_lsn"`
	Xid        uint32    `json:"xid"`
	Rows       int       `json:"rows"`
	CommitTime time.Time `json:"commit_time,omitzero"`
}

// Marshal returns the record value of c.
func (c Checkpoint) Marshal() []byte {
	w := wire{Version: Version, LSN: c.LSN.String(), SystemID: c.SystemID, Timeline: c.Timeline,
		Database: c.Database, Slot: c.Slot, Written: c.Written.UTC()}
	if c.Last != nil {
		w.Last = &wireLast{CommitLSN: c.Last.CommitLSN.String(), Xid: c.Last.Xid, CommitTime: c.Last.CommitTime.UTC()}
	}
	if c.Open != nil {
		w.Open = &wireOpen{CommitLSN: c.Open.CommitLSN.String(), Xid: c.Open.Xid, Rows: c.Open.Rows, CommitTime: c.Open.CommitTime.UTC()}
	}
	b, _ := json.Marshal(w) // strings, numbers and a time: cannot fail
	return b
}

// Parse reads a record value written by Marshal.
func Parse(value []byte) (Checkpoint, error) {
	var w wire
	if err := json.Unmarshal(value, &w); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint is not JSON: %w", err)
	}
	if w.Version != Version {
		return Checkpoint{}, fmt.Errorf("checkpoint version %d, this walrelay reads %d", w.Version, Version)
	}
	if w.SystemID == "" {
		return Checkpoint{}, errors.New("checkpoint has no system_id")
	}
	lsn, err := pglogrepl.ParseLSN(w.LSN)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint lsn %q: %w", w.LSN, err)
	}
	c := Checkpoint{LSN: lsn, SystemID: w.SystemID, Timeline: w.Timeline, Database: w.Database, Slot: w.Slot, Written: w.Written}
	if w.Last != nil {
		commit, err := pglogrepl.ParseLSN(w.Last.CommitLSN)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint last.commit_lsn %q: %w", w.Last.CommitLSN, err)
		}
		if commit >= lsn {
			return Checkpoint{}, fmt.Errorf("checkpoint last transaction at %s does not end at %s: its commit LSN is not before it", commit, lsn)
		}
		c.Last = &Last{CommitLSN: commit, Xid: w.Last.Xid, CommitTime: w.Last.CommitTime}
	}
	if w.Open != nil {
		commit, err := pglogrepl.ParseLSN(w.Open.CommitLSN)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint open.commit_lsn %q: %w", w.Open.CommitLSN, err)
		}
		if w.Open.Rows < 1 || commit < lsn {
			return Checkpoint{}, fmt.Errorf("checkpoint open transaction at %s with %d rows is not after %s", commit, w.Open.Rows, lsn)
		}
		c.Open = &Open{CommitLSN: commit, Xid: w.Open.Xid, Rows: w.Open.Rows, CommitTime: w.Open.CommitTime}
	}
	return c, nil
}

// Read returns the last committed checkpoint with key in topic, and false
// when there is none or the last one is a tombstone. opts configure the
// client (seed brokers, TLS, SASL).
//
// It reads the topic read_committed to its end offsets (high watermarks)
// when it began, once every transaction with records below them has
// ended (kafkalog.ReadStable): a checkpoint topic several deployments
// share may hold another deployment's open transaction below this key's
// newest checkpoints, and a read to the last stable offset would return an
// older one. Read so waits, for as long as ctx allows: when ctx ends
// first, the error wraps ErrHeld and ctx's error. Read after fencing the
// transactional id: that ends the transaction an older process of the key
// left open, so that what Read returns is final.
//
// A last record of the key that does not parse is ErrUnreadable.
func Read(ctx context.Context, topic, key string, opts ...kgo.Opt) (Checkpoint, bool, error) {
	var last *kgo.Record
	_, err := kafkalog.ReadStable(ctx, topic, opts, func(r *kgo.Record) {
		if string(r.Key) == key {
			last = r
		}
	})
	if held := (*kafkalog.HeldError)(nil); errors.As(err, &held) {
		start := held.Stable
		if len(held.Open) > 0 {
			start = held.Open[0].StartOffset
		}
		return Checkpoint{}, false, fmt.Errorf("reading checkpoint topic: %w; until that transaction ends (the broker aborts it after its transaction timeout at the latest) the last committed checkpoint of %q may lie above the offset it holds: "+
			"give each deployment its own relay.checkpoint_topic, or end a transaction left hanging: kafka-transactions.sh --bootstrap-server BROKER find-hanging --topic %s --partition %d, then kafka-transactions.sh --bootstrap-server BROKER abort --topic %s --partition %d --start-offset %d",
			err, key, topic, held.Partition, topic, held.Partition, start)
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("reading checkpoint topic: %w", err)
	}
	if last == nil || last.Value == nil {
		return Checkpoint{}, false, nil
	}
	c, err := Parse(last.Value)
	if err != nil {
		const show = 64
		head := last.Value[:min(len(last.Value), show)]
		more := ""
		if len(last.Value) > show {
			more = fmt.Sprintf(" (first %d of %d bytes)", show, len(last.Value))
		}
		return Checkpoint{}, false, fmt.Errorf("%w: topic %q partition %d offset %d key %q value %q%s: %w; "+
			"run the walrelay version that wrote it (upgrade), or, accepting that events after the slot's position may be published again, delete it with a tombstone: "+
			"printf '%%s\\t\\n' '%s' | kcat -P -b BROKER -t %s -p %d -K '\\t' -Z",
			ErrUnreadable, topic, last.Partition, last.Offset, key, head, more, err, key, topic, last.Partition)
	}
	return c, true, nil
}

// History returns the committed checkpoints with key still in topic, in
// the order they were written, skipping those that do not parse. Older
// ones are there until compaction removes them (never from the active
// segment): it is a best-effort record of how far earlier Kafka
// transactions went, which a relay may prove on the WAL it streams (by
// their last transactions) to skip more of what a restored slot sends
// again. Nothing may be skipped by a checkpoint of it that was not so
// proven. opts configure the client, as for Read.
func History(ctx context.Context, topic, key string, opts ...kgo.Opt) ([]Checkpoint, error) {
	var all []Checkpoint
	_, err := kafkalog.ReadToEnd(ctx, topic, opts, func(r *kgo.Record) {
		if string(r.Key) != key || r.Value == nil {
			return
		}
		if c, err := Parse(r.Value); err == nil {
			all = append(all, c)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint topic: %w", err)
	}
	return all, nil
}
