package relay_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/dbzoffset"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// copyRows commits n outbox rows with one COPY (Postgres writes them as
// multi-insert WAL records of up to 1000 rows, which share an LSN) and
// returns their ids in order and the transaction's xid.
func copyRows(t *testing.T, dsn, typ string, n int) (ids []string, xid uint32) {
	t.Helper()
	conn := testenv.Connect(t, dsn)
	defer conn.Close(context.Background())
	rows := make([][]any, n)
	for i := range rows {
		// The id is given, so the COPY need not run gen_random_uuid():
		// a volatile default makes Postgres insert row by row.
		var b [16]byte
		_, _ = rand.Read(b[:])
		id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		ids = append(ids, id)
		rows[i] = []any{id, typ, fmt.Sprintf("a-%d", i%7), "Happened", fmt.Sprintf(`{"i": %d}`, i)}
	}
	err := pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(t.Context(), pgx.Identifier{"outbox"}, []string{"id", "aggregatetype", "aggregateid", "type", "payload"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		return tx.QueryRow(t.Context(), `SELECT txid_current()::text::bigint`).Scan(&xid)
	})
	if err != nil {
		t.Fatalf("copying %d rows: %v", n, err)
	}
	return ids, xid
}

// insertLSNs returns the XLogData start LSN of each Insert message of
// transaction xid, in order, read from the probe slot.
func (f *fixture) insertLSNs(t *testing.T, xid uint32) []pglogrepl.LSN {
	t.Helper()
	rows, err := testenv.Connect(t, f.dsn).Query(t.Context(), `
		SELECT lsn::text FROM pg_logical_slot_peek_binary_changes('probe', NULL, NULL,
			'proto_version', '1', 'publication_names', 'walrelay_outbox')
		WHERE xid::text = $1 AND get_byte(data, 0) = 73 -- 'I'nsert`, fmt.Sprint(xid))
	if err != nil {
		t.Fatal(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	lsns := make([]pglogrepl.LSN, len(texts))
	for i, s := range texts {
		lsns[i] = mustLSN(t, s)
	}
	return lsns
}

// A relay started with SkipPublished at a row in the middle of a COPY
// (several rows share its LSN) publishes exactly the rows after it and the
// later transactions, each once, although its session is broken while it
// reads the transaction (Postgres re-sends it whole: the rows passed over
// are passed over again and the resume count covers only the others).
// Without SkipPublished every row would be published.
func TestSkipPublishedInsideTransaction(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Relay.MaxInFlightRecords = 50 })
	f.createProbe(t)
	ids, xid := copyRows(t, f.dsn, "order", 3000)
	later, _ := copyRows(t, f.dsn, "order", 2)
	lsns := f.insertLSNs(t, xid)
	if len(lsns) != len(ids) {
		t.Fatalf("probe shows %d inserts, want %d", len(lsns), len(ids))
	}
	// The offset points at row k: its LSN, and how many rows at that LSN
	// up to it (lsn_events_processed).
	k := 1500
	at := 0
	for j := 0; j <= k; j++ {
		if lsns[j] == lsns[k] {
			at++
		}
	}
	if at < 2 || lsns[0] == lsns[k] {
		t.Fatalf("row %d is row %d at its LSN %s (first row at %s): the COPY was not written as multi-inserts; the test proves nothing", k, at, lsns[k], lsns[0])
	}
	want := append(append([]string{}, ids[k+1:]...), later...)

	// Slow acks and a small cap keep the relay inside the transaction long
	// enough to break its session there.
	f.slowProduce(20 * time.Millisecond)
	r, err := relay.New(f.cfg, f.logs.logger(), nil, relay.SkipPublished(dbzoffset.Open{Xid: xid, LSN: lsns[k], Events: at}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	admin := testenv.Connect(t, f.dsn)
	f.logs.waitLog(t, "taking over inside the transaction", nil, 60*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if n, _ := r.Tracker().InFlight(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing in flight after the skip began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pid := walsender(t, admin)
	if _, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	f.logs.waitLog(t, "resuming a transaction after reconnecting", nil, 60*time.Second)
	f.logs.waitLog(t, "took over the transaction the previous relay left open", nil, 120*time.Second)
	f.waitCaughtUp(t, 120*time.Second)

	if n := f.logs.count("taking over inside the transaction the previous relay left open; passing over the rows it had published"); n != 1 {
		t.Errorf("logged the start of the takeover %d times, want once", n)
	}
	if l := f.logs.lines("took over the transaction"); len(l) != 1 || l[0]["rows_passed_over"] != float64(k+1) {
		t.Errorf("took-over lines %v, want one with rows_passed_over %d (the last pass)", l, k+1)
	}
	recs := f.broker.ReadAll(t, []string{"outbox.event.order"}, len(want), 60*time.Second)
	got := map[string]int{}
	for _, r := range recs {
		id, _ := header(r, "id")
		got[id]++
	}
	for _, id := range ids[:k+1] {
		if got[id] > 0 {
			t.Fatalf("row %s, at or before the position taken over, was published", id)
		}
	}
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("row %s published %d times, want once", id, got[id])
		}
	}
	if total := endOffsets(t, f, "outbox.event.order"); total != int64(len(want)) {
		t.Errorf("%d records on the topic, want %d", total, len(want))
	}
}
