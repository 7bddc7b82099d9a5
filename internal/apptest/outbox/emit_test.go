package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

const publication = "walrelay_outbox"

// outboxDB is a database with walrelay setup's outbox table, its
// publication, a pgoutput slot, an orders table for the business change,
// and a traceparent column on the outbox for Fields.
type outboxDB struct{ dsn, slot string }

func newOutboxDB(t *testing.T) outboxDB {
	t.Helper()
	d := outboxDB{testenv.Postgres(t).NewDatabase(t), testenv.UniqueName(t, "s")}
	conn := testenv.Connect(t, d.dsn)
	if _, err := setup.Run(t.Context(), conn, setup.Names{Schema: "public", Table: "outbox", Publication: publication, Slot: d.slot}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	testenv.Exec(t, d.dsn, `ALTER TABLE public.outbox ADD COLUMN traceparent text;
		CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL)`)
	return d
}

// decoded is what the slot holds: the transactions' ids and, in WAL
// order, each message with the xid of the transaction it is in (0 for one
// outside a transaction).
type decoded struct {
	xids     []uint32
	messages []*pglogrepl.LogicalDecodingMessage
	msgXids  []uint32
	inserts  int
}

// peek reads the slot without consuming it, as walrelay's session would
// receive it: pgoutput, proto_version 1, messages on.
func (d outboxDB) peek(t *testing.T) decoded {
	t.Helper()
	conn := testenv.Connect(t, d.dsn)
	rows, err := conn.Query(t.Context(), `SELECT xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2, 'messages', 'true')`, d.slot, publication)
	if err != nil {
		t.Fatal(err)
	}
	var out decoded
	var inTx uint32
	for rows.Next() {
		var xid int64
		var data []byte
		if err := rows.Scan(&xid, &data); err != nil {
			t.Fatal(err)
		}
		msg, err := pglogrepl.Parse(data)
		if err != nil {
			t.Fatalf("decoding pgoutput message %q: %v", data, err)
		}
		switch m := msg.(type) {
		case *pglogrepl.BeginMessage:
			inTx = m.Xid
			out.xids = append(out.xids, m.Xid)
		case *pglogrepl.CommitMessage:
			inTx = 0
		case *pglogrepl.LogicalDecodingMessage:
			out.messages = append(out.messages, m)
			out.msgXids = append(out.msgXids, inTx)
		case *pglogrepl.InsertMessage:
			out.inserts++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newWriter(t *testing.T, cfg outbox.Config) *outbox.Writer {
	t.Helper()
	w, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// inTx runs f in a pgx transaction with the business change and commits
// it (or rolls it back), returning the transaction's xid.
func inTx(t *testing.T, dsn string, commit bool, f func(pgx.Tx)) uint32 {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var xid int64
	if err := tx.QueryRow(t.Context(), `INSERT INTO orders VALUES ('o-1', 'paid') RETURNING pg_current_xact_id()::text::bigint`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	f(tx)
	if commit {
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return uint32(xid)
}

// TestEmitRow writes a row with every column set, with the package's
// Emit (the default Writer), and reads it back.
func TestEmitRow(t *testing.T) {
	d := newOutboxDB(t)
	ts := time.Date(2026, 11, 25, 4, 30, 0, 123456000, time.UTC)
	var id string
	inTx(t, d.dsn, true, func(tx pgx.Tx) {
		var err error
		id, err = outbox.Emit(t.Context(), tx, outbox.Event{
			AggregateType: "order", AggregateID: "o-1", Type: "OrderPaid",
			Payload: []byte(`{"orderId": "o-1", "cents": 1999}`), Timestamp: ts,
			Fields: map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	if len(id) != 36 || id[14] != '7' {
		t.Fatalf("generated id %q is not a UUID version 7", id)
	}
	var got struct {
		id, aggType, aggID, typ, payload, trace string
		at                                      time.Time
	}
	conn := testenv.Connect(t, d.dsn)
	err := conn.QueryRow(t.Context(), `SELECT id::text, aggregatetype, aggregateid, type, payload::text, created_at, traceparent FROM public.outbox`).
		Scan(&got.id, &got.aggType, &got.aggID, &got.typ, &got.payload, &got.at, &got.trace)
	if err != nil {
		t.Fatal(err)
	}
	if got.id != id || got.aggType != "order" || got.aggID != "o-1" || got.typ != "OrderPaid" ||
		got.payload != `{"cents": 1999, "orderId": "o-1"}` || !got.at.Equal(ts) ||
		got.trace != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Errorf("outbox row = %+v, want the event's id %s and fields", got, id)
	}
	if dec := d.peek(t); dec.inserts != 1 || len(dec.messages) != 0 {
		t.Errorf("slot holds %d inserts and %d messages, want the outbox row's (orders is not published) and none", dec.inserts, len(dec.messages))
	}
}

// TestEmitMessage writes a message event in the transaction of a business
// change and finds it in the slot, in that transaction, with the exact
// JSON of the contract (docs: "Writing and consuming events from Go").
func TestEmitMessage(t *testing.T) {
	d := newOutboxDB(t)
	w := newWriter(t, outbox.Config{Style: outbox.StyleMessage, Prefix: "outbox"})
	ts := time.Date(2026, 11, 25, 4, 30, 0, 123456000, time.UTC)
	xid := inTx(t, d.dsn, true, func(tx pgx.Tx) {
		id, err := w.Emit(t.Context(), tx, outbox.Event{
			ID: "0193a3e4-0000-7000-8000-000000000001", AggregateType: "order", AggregateID: "o-1", Type: "OrderPaid",
			Payload: []byte(` {"orderId": "o-1", "note": "<b>&</b>"} `), Timestamp: ts,
			Fields: map[string]any{"traceparent": "00-0af7-01", "attempt": 2, "vip": true, "coupon": nil, "at": ts, "note": "a<b & c>d"},
		})
		if err != nil || id != "0193a3e4-0000-7000-8000-000000000001" {
			t.Fatalf("Emit = %q, %v; want the event's own id", id, err)
		}
		if _, err := w.Emit(t.Context(), tx, outbox.Event{AggregateType: "order", AggregateID: "o-1", Type: "OrderNoted"}); err != nil {
			t.Fatal(err)
		}
	})
	dec := d.peek(t)
	if len(dec.messages) != 2 || dec.inserts != 0 {
		t.Fatalf("slot holds %d messages and %d inserts, want 2 messages", len(dec.messages), dec.inserts)
	}
	m := dec.messages[0]
	want := `{"id":"0193a3e4-0000-7000-8000-000000000001","aggregatetype":"order","aggregateid":"o-1","type":"OrderPaid",` +
		`"payload":{"orderId": "o-1", "note": "<b>&</b>"},"created_at":"2026-11-25 04:30:00.123456+00",` +
		`"at":"2026-11-25 04:30:00.123456+00","attempt":2,"coupon":null,"note":"a<b & c>d","traceparent":"00-0af7-01","vip":true}`
	if !m.Transactional || m.Prefix != "outbox" || string(m.Content) != want || dec.msgXids[0] != xid {
		t.Errorf("message = transactional %v, prefix %q, in transaction %d, content\n%s\nwant transactional, \"outbox\", in %d,\n%s",
			m.Transactional, m.Prefix, dec.msgXids[0], m.Content, xid, want)
	}
	// The second event: a generated id, no payload key (NULL), no timestamp.
	var second map[string]any
	if err := json.Unmarshal(dec.messages[1].Content, &second); err != nil {
		t.Fatal(err)
	}
	if id, _ := second["id"].(string); len(id) != 36 || id[14] != '7' || len(second) != 4 || dec.msgXids[1] != xid {
		t.Errorf("second message = %s in transaction %d, want a generated v7 id and the three routing keys only, in %d", dec.messages[1].Content, dec.msgXids[1], xid)
	}
}

// TestRolledBackLeavesNothing: an event of a rolled-back transaction is
// neither in the table nor in the slot, in either style, with pgx and
// with database/sql.
func TestRolledBackLeavesNothing(t *testing.T) {
	d := newOutboxDB(t)
	rows := newWriter(t, outbox.Config{})
	msgs := newWriter(t, outbox.Config{Style: outbox.StyleMessage, Prefix: "outbox"})
	inTx(t, d.dsn, false, func(tx pgx.Tx) {
		for _, w := range []*outbox.Writer{rows, msgs} {
			if _, err := w.Emit(t.Context(), tx, validEvent()); err != nil {
				t.Fatal(err)
			}
		}
	})
	db := openSQL(t, d.dsn)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*outbox.Writer{rows, msgs} {
		if _, err := w.EmitSQL(t.Context(), tx, validEvent()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A committed transaction after them, so the slot has decoded past
	// the rolled-back ones when we peek.
	testenv.Exec(t, d.dsn, `INSERT INTO orders VALUES ('o-2', 'created')`)
	if n := testenv.QueryValue[int64](t, d.dsn, `SELECT count(*) FROM public.outbox`); n != 0 {
		t.Errorf("outbox holds %d rows after rollbacks, want 0", n)
	}
	if dec := d.peek(t); len(dec.messages) != 0 || dec.inserts != 0 {
		t.Errorf("slot holds %d messages and %d inserts after rollbacks, want none", len(dec.messages), dec.inserts)
	}
}

func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestEmitSQL writes both styles through database/sql (pgx's stdlib
// driver) in one committed transaction.
func TestEmitSQL(t *testing.T) {
	_ = stdlib.GetDefaultDriver() // registers "pgx"
	d := newOutboxDB(t)
	db := openSQL(t, d.dsn)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := outbox.Event{AggregateType: "order", AggregateID: "o-9", Type: "OrderShipped", Payload: []byte(`[1, "two"]`),
		Timestamp: ts, Fields: map[string]any{"traceparent": "tp"}}
	rowID, err := newWriter(t, outbox.Config{Table: "outbox"}).EmitSQL(t.Context(), tx, ev)
	if err != nil {
		t.Fatal(err)
	}
	msgID, err := newWriter(t, outbox.Config{Style: outbox.StyleMessage, Prefix: "outbox"}).EmitSQL(t.Context(), tx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if rowID == msgID {
		t.Errorf("both events got id %s; each Emit generates its own", rowID)
	}
	var got string
	if err := db.QueryRowContext(t.Context(), `SELECT concat_ws('|', id, aggregatetype, aggregateid, type, payload, created_at, traceparent) FROM outbox`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := rowID + `|order|o-9|OrderShipped|[1, "two"]|2026-01-02 03:04:05+00|tp`; got != want {
		t.Errorf("row = %s, want %s", got, want)
	}
	dec := d.peek(t)
	want := `{"id":"` + msgID + `","aggregatetype":"order","aggregateid":"o-9","type":"OrderShipped","payload":[1, "two"],` +
		`"created_at":"2026-01-02 03:04:05+00","traceparent":"tp"}`
	if len(dec.messages) != 1 || !dec.messages[0].Transactional || string(dec.messages[0].Content) != want || dec.inserts != 1 {
		t.Fatalf("slot holds %d inserts and messages %v, want one insert and the transactional message %s", dec.inserts, dec.messages, want)
	}
}
