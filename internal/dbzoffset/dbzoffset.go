// Package dbzoffset reads where a Debezium Postgres connector stands, from
// Kafka Connect's offsets topic, and says what of its replication slot's
// backlog that connector had already published, as Debezium's own restart
// would decide. `walrelay debezium takeover` uses it to start from the
// connector's slot without losing what the connector left and without
// publishing again what it had committed.
//
// In: the offsets topic's records (Read) or one offset value (Parse). Out:
// an Offset with the fields of Debezium's PostgresOffsetContext.getOffset()
// and, from it, a Position: the LSN up to which whole transactions were
// published, and where inside the next transaction the connector was.
//
// The offsets topic. Connect's OffsetStorageWriter writes each offset with
// the worker's internal converters, JsonConverter without schemas: the key
// is the JSON of the list [connector name, source partition], for
// Debezium's Postgres connector ["<name>",{"server":"<topic.prefix>"}]
// (PostgresPartition.getSourcePartition), and the value the JSON object of
// the offset map. A record with a null value (a tombstone, written by
// DELETE /connectors/<name>/offsets) resets the connector's offset. The
// topic is compacted and partitioned by key: Read reads every partition to
// its end, as Connect's KafkaOffsetBackingStore does, and the last record
// of a key wins. Keys are matched by their parsed JSON, not their bytes.
//
// The offset (io.debezium.connector.postgresql.PostgresOffsetContext,
// getOffset and Loader.load), for pgoutput:
//
//   - lsn: the position of the last event the offset belongs to: the
//     XLogData start of its pgoutput message, which is the change's WAL
//     record start for a row, the end of the commit record for a COMMIT.
//   - lsn_proc: the last completely processed LSN; for pgoutput every
//     message is the last of its LSN (PgOutputReplicationMessage.
//     isLastEventForLsn), so lsn_proc equals lsn.
//   - lsn_commit: the end LSN of the last transaction the connector saw
//     commit (pgoutput Commit's TransactionEndLSN, the XLogData start of
//     the Commit message); Loader.load falls back to lsn_proc without it.
//     The connector flushes the slot to this LSN of a committed offset
//     (PostgresStreamingChangeEventSource.commitOffset), so the slot's
//     confirmed_flush_lsn is at or behind it.
//   - txId: the transaction's xid (pgoutput Begin's Xid, unsigned).
//   - messageType: the event's ReplicationMessage.Operation (INSERT,
//     UPDATE, DELETE, TRUNCATE, MESSAGE, BEGIN, COMMIT).
//   - lsn_events_processed: how many events at lsn were processed, when
//     more than one row shares an LSN (a COPY's multi-insert record);
//     written only when > 0 (Debezium 3.x).
//   - ts_usec: the commit time, in microseconds.
//
// How Debezium resumes (PostgresStreamingChangeEventSource.execute and
// io.debezium.connector.postgresql.connection.WalPositionLocator): it starts
// streaming at lsn_proc, so Postgres itself skips every transaction whose
// commit record starts before that LSN or the slot's confirmed_flush_lsn;
// then WalPositionLocator.resumeFromLsn searches the stream for the event
// after lsn_proc (after lsn_events_processed events at it), and a COMMIT
// past lsn_commit seen first means the resume point is that transaction's
// beginning; skipMessage then drops the DML before the resume point
// (BEGIN, COMMIT and RELATION are never dropped). In outcome:
//
//  1. every transaction committed at or before lsn_commit is skipped;
//  2. after a row event (messageType INSERT, UPDATE, DELETE, TRUNCATE, or
//     a transactional MESSAGE), in the transaction txId, the changes
//     before lsn and the first lsn_events_processed at lsn are skipped and
//     the rest is published;
//  3. after BEGIN, COMMIT, a non-transactional MESSAGE (lsn_commit equals
//     lsn) or no type, nothing more is skipped.
//
// Position encodes exactly that, with one deliberate difference: without
// lsn_events_processed (or with 1), WalPositionLocator skips every event
// at lsn, although the offset proves only the first was processed; a COPY
// of several outbox rows then loses the rest. Position skips only the
// first: walrelay may publish such a row again, never lose it.
//
// It does not connect to Postgres, move slots or run the relay: the
// takeover command does, with internal/postgres, internal/operator and
// internal/relay.
package dbzoffset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// Sentinel errors, returned wrapped in a message that names the connector,
// topic or field; test with errors.Is.
var (
	// ErrNoOffset: the offsets topic holds no offset for the connector
	// (name or topic prefix wrong, or the connector never committed one).
	ErrNoOffset = errors.New("no offset for the connector")
	// ErrOffsetReset: the connector's last record is a tombstone: its
	// offset was deleted (reset) and Debezium would start afresh.
	ErrOffsetReset = errors.New("the connector's offset was reset")
	// ErrAmbiguous: no topic prefix was given and the connector has
	// offsets for several, or one key has offsets in several partitions.
	ErrAmbiguous = errors.New("several offsets match")
	// ErrNoTopic: the offsets topic does not exist.
	ErrNoTopic = errors.New("offsets topic does not exist")
	// ErrMalformed: a record of the connector is not an offset Debezium's
	// Postgres connector writes.
	ErrMalformed = errors.New("malformed Debezium offset")
	// ErrUnsupported: the offset is one a takeover cannot start from (an
	// unfinished snapshot, or no LSN of a streamed event).
	ErrUnsupported = errors.New("cannot take over from this offset")
)

// Key is an offsets-topic key of a Debezium Postgres connector.
type Key struct {
	Connector string // the connector's name (Connect's namespace)
	Server    string // the source partition's "server": topic.prefix
}

// ParseKey parses a key as Connect writes it, ["<name>",{"server":"<p>"}],
// ignoring whitespace and any other member of the partition map. ok is
// false for a key of another shape (another kind of connector).
func ParseKey(b []byte) (k Key, ok bool) {
	var parts []json.RawMessage
	if json.Unmarshal(b, &parts) != nil || len(parts) != 2 {
		return Key{}, false
	}
	var partition map[string]any
	if json.Unmarshal(parts[0], &k.Connector) != nil || json.Unmarshal(parts[1], &partition) != nil {
		return Key{}, false
	}
	k.Server, ok = partition["server"].(string)
	return k, ok
}

// Bytes is the key as Connect's JsonConverter writes it.
func (k Key) Bytes() []byte {
	b, _ := json.Marshal([]any{k.Connector, map[string]string{"server": k.Server}})
	return b
}

func (k Key) String() string { return string(k.Bytes()) }

// Offset is one Debezium Postgres offset (PostgresOffsetContext.getOffset).
// An LSN absent from the value is 0.
type Offset struct {
	LSN       pglogrepl.LSN // lsn
	LSNProc   pglogrepl.LSN // lsn_proc
	LSNCommit pglogrepl.LSN // lsn_commit, or lsn_proc when absent (Loader.load)
	TxID      uint32        // txId
	HasTxID   bool
	// MessageType is messageType, "" when absent.
	MessageType string
	// EventsProcessed is lsn_events_processed, 0 when absent.
	EventsProcessed int64
	TsUsec          int64 // ts_usec
	// Snapshot is true for an offset written during an unfinished
	// snapshot (snapshot set, snapshot_completed not true).
	Snapshot bool
}

// messageTypes are the ReplicationMessage.Operation names an offset
// carries.
var messageTypes = []string{"INSERT", "UPDATE", "DELETE", "TRUNCATE", "MESSAGE", "BEGIN", "COMMIT", "NOOP", "ORIGIN"}

// Parse parses an offset value (the JSON object Connect stores).
func Parse(value []byte) (Offset, error) {
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return Offset{}, fmt.Errorf("%w: value %q is not a JSON object", ErrMalformed, value)
	}
	var o Offset
	var err error
	lsn := func(key string) pglogrepl.LSN {
		v, ok, e := number(m, key)
		if e == nil && ok && v < 0 {
			e = fmt.Errorf("%w: %s %d is negative", ErrMalformed, key, v)
		}
		if err == nil {
			err = e
		}
		return pglogrepl.LSN(v)
	}
	o.LSN, o.LSNProc, o.LSNCommit = lsn("lsn"), lsn("lsn_proc"), lsn("lsn_commit")
	if err != nil {
		return Offset{}, err
	}
	if o.LSNCommit == 0 {
		o.LSNCommit = o.LSNProc // PostgresOffsetContext.Loader.load
	}
	var tx int64
	if tx, o.HasTxID, err = number(m, "txId"); err != nil {
		return Offset{}, err
	}
	if tx < 0 || tx > 1<<32-1 {
		return Offset{}, fmt.Errorf("%w: txId %d is not a 32-bit xid", ErrMalformed, tx)
	}
	o.TxID = uint32(tx)
	if o.EventsProcessed, _, err = number(m, "lsn_events_processed"); err != nil {
		return Offset{}, err
	}
	if o.TsUsec, _, err = number(m, "ts_usec"); err != nil {
		return Offset{}, err
	}
	switch t := m["messageType"].(type) {
	case nil:
	case string:
		if !isOneOf(t, messageTypes) {
			return Offset{}, fmt.Errorf("%w: messageType %q is none of %s", ErrMalformed, t, strings.Join(messageTypes, ", "))
		}
		o.MessageType = t
	default:
		return Offset{}, fmt.Errorf("%w: messageType %v is not a string", ErrMalformed, t)
	}
	// Old versions wrote "snapshot": true, newer the snapshot type
	// ("INITIAL", ...); either way with snapshot_completed until done.
	if s, ok := m["snapshot"]; ok && s != nil && s != false {
		o.Snapshot = m["snapshot_completed"] != true
	}
	return o, nil
}

// number reads an integer member; ok is false when absent or null.
func number(m map[string]any, key string) (v int64, ok bool, err error) {
	switch n := m[key].(type) {
	case nil:
		return 0, false, nil
	case json.Number:
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%w: %s %s is not an integer", ErrMalformed, key, n)
		}
		return v, true, nil
	default:
		return 0, false, fmt.Errorf("%w: %s %v is not a number", ErrMalformed, key, n)
	}
}

func isOneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// Position is what a Debezium restart from an Offset skips.
type Position struct {
	// Through: every transaction committed at or before it was published.
	// It is lsn_commit, the end of a commit record (or lsn_proc for an old
	// offset): Postgres skips exactly the transactions whose commit record
	// starts before a slot's confirmed_flush_lsn, so a slot advanced to
	// Through re-sends none of them and every later one.
	Through pglogrepl.LSN
	// Open is where the connector was inside the next transaction; nil
	// when the offset is at a transaction boundary.
	Open *Open
}

// Open is a position inside a transaction: its changes before LSN, and
// the first Events at LSN, were published.
type Open struct {
	Xid    uint32
	LSN    pglogrepl.LSN
	Events int // at least 1
}

// Position returns what Debezium's restart would skip (see the package
// doc). It fails (ErrUnsupported) for an offset of an unfinished snapshot
// or one without lsn_proc and lsn_commit (Debezium before 1.0 or a
// snapshot offset), and for a row event without txId.
func (o Offset) Position() (Position, error) {
	switch {
	case o.Snapshot:
		return Position{}, fmt.Errorf("%w: the offset was written during the connector's initial snapshot, which it would run again: let the snapshot finish (or use snapshot.mode=never) before taking over", ErrUnsupported)
	case o.LSNCommit == 0:
		return Position{}, fmt.Errorf("%w: the offset has neither lsn_proc nor lsn_commit (lsn %s): let the connector stream at least one event with a current Debezium version, then stop it and take over", ErrUnsupported, o.LSN)
	}
	p := Position{Through: o.LSNCommit}
	switch o.MessageType {
	case "", "BEGIN", "COMMIT", "NOOP", "ORIGIN":
		return p, nil
	case "MESSAGE":
		if o.LSNCommit == o.LSN {
			return p, nil // non-transactional: no transaction was open
		}
	}
	if !o.HasTxID {
		return Position{}, fmt.Errorf("%w: the offset is inside a transaction (%s at %s) but has no txId", ErrUnsupported, o.MessageType, o.LSN)
	}
	// WalPositionLocator searches for lsn_proc when the offset has it,
	// else for lsn (PostgresStreamingChangeEventSource.execute).
	at := o.LSNProc
	if at == 0 {
		at = o.LSN
	}
	p.Open = &Open{Xid: o.TxID, LSN: at, Events: int(max(o.EventsProcessed, 1))}
	return p, nil
}
