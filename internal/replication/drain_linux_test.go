package replication

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/bench"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// BenchmarkStreamDrain drains a backlog of b.N outbox rows from a real
// Postgres through a Stream whose handler does nothing: walrelay's
// Postgres side alone (socket reads, pgoutput decode, dispatch, status
// updates), without the router and the Kafka producer. Set against the
// harness's end-to-end drains of the same shapes, it splits walrelay's CPU
// per event into what reading the slot costs and what producing costs.
//
// One op is one event. The backlog is written before the timer starts, by
// a server-side loop (one transaction per K rows), and the stream is
// started on a slot created before it. GOMAXPROCS is 1 during the drain,
// as in walrelay (relay.max_procs). Reported besides ns/op:
//
//   - cpu-µs/event: this process's CPU time (user and system) during the
//     drain, per event;
//   - walsender-cpu-µs/event: the walsender's, read from /proc when the
//     server runs on this machine;
//   - events/s.
//
// Run it with a fixed count, e.g.
//
//	go test -run '^$' -bench StreamDrain -benchtime 200000x ./pkg/replication
func BenchmarkStreamDrain(b *testing.B) {
	if testing.Short() {
		b.Skip("needs Postgres and builds large backlogs")
	}
	for _, perTx := range []int{1, 100} {
		name := "single"
		if perTx > 1 {
			name = "tx" + strconv.Itoa(perTx)
		}
		b.Run(name, func(b *testing.B) { benchmarkStreamDrain(b, perTx) })
	}
}

// drainFillSQL writes n outbox rows, per_tx rows per transaction, with
// benchPayload (about 300 bytes of jsonb) as each payload.
const drainFillSQL = `CREATE OR REPLACE PROCEDURE drain_fill(n bigint, per_tx int, payload jsonb)
LANGUAGE plpgsql AS $$
DECLARE
	done bigint := 0;
	k int;
BEGIN
	WHILE done < n LOOP
		k := least(per_tx, n - done);
		INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		SELECT 'order', 'A-' || ((done + i) % 10000), 'OrderCreated', payload
		FROM generate_series(1, k) i;
		COMMIT;
		done := done + k;
	END LOOP;
END $$`

func benchmarkStreamDrain(b *testing.B, perTx int) {
	pg := testenv.Postgres(b)
	dsn := pg.NewDatabase(b)
	conn := testenv.Connect(b, dsn)
	ctx := b.Context()
	// setup creates the slot, before the backlog is written.
	slot := testenv.UniqueName(b, "drain")
	if _, err := setup.Run(ctx, conn, setup.Names{Schema: "public", Table: "outbox", Publication: "outbox_pub", Slot: slot}); err != nil {
		b.Fatalf("setup: %v", err)
	}
	if _, err := conn.Exec(ctx, drainFillSQL); err != nil {
		b.Fatalf("creating the fill procedure: %v", err)
	}
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CALL drain_fill($1, $2, $3)`, b.N, perTx, benchPayload); err != nil {
		b.Fatalf("writing the backlog: %v", err)
	}
	txs := int64((b.N + perTx - 1) / perTx)

	h := &drainHandler{want: txs, done: make(chan struct{})}
	cfg := testConfig(dsn, slot, "outbox_pub")
	cfg.ReadWait = time.Millisecond // postgres.read_wait's default
	s := newStream(b, cfg, h, h, nil)

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	b.ResetTimer()
	cpu0 := bench.SelfCPU()
	began := time.Now()
	go func() { stopped <- s.Run(runCtx) }()

	var walsender int
	select {
	case <-h.done:
	case err := <-stopped:
		b.Fatalf("stream stopped after %d of %d transactions: %v", h.commits.Load(), txs, err)
	case <-time.After(10 * time.Minute):
		b.Fatalf("drain did not finish: %d of %d transactions", h.commits.Load(), txs)
	}
	elapsed := time.Since(began)
	cpu := bench.SelfCPU() - cpu0
	b.StopTimer()
	// The walsender's CPU, read while it still runs.
	_ = conn.QueryRow(ctx, `SELECT coalesce(max(active_pid), 0) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&walsender)
	wsCPU, wsErr := bench.ProcessCPU(walsender) // fails if the server is not on this machine
	cancel()
	if err := <-stopped; err != nil {
		b.Fatalf("stream: %v", err)
	}
	// Drop the slot now rather than with the database at the end, so the
	// runs' backlogs do not pile up in pg_wal. Its walsender may hold it
	// for a moment after the stream has gone.
	for try := 0; ; try++ {
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
		if err == nil {
			break
		}
		if try == 50 {
			b.Fatalf("dropping the slot: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	events := float64(b.N)
	b.ReportMetric(cpu.Seconds()*1e6/events, "cpu-µs/event")
	b.ReportMetric(events/elapsed.Seconds(), "events/s")
	if walsender > 0 && wsErr == nil {
		b.ReportMetric(wsCPU.Seconds()*1e6/events, "walsender-cpu-µs/event")
	}
}

// drainHandler counts transactions and confirms each commit, so the slot
// advances as it would behind a relay whose records are acknowledged.
type drainHandler struct {
	nopHandler
	want      int64
	commits   atomic.Int64
	confirmed atomic.Uint64
	done      chan struct{}
}

func (h *drainHandler) Commit(_ context.Context, m *pglogrepl.CommitMessage) error {
	h.confirmed.Store(uint64(m.TransactionEndLSN))
	if h.commits.Add(1) == h.want {
		close(h.done)
	}
	return nil
}

func (h *drainHandler) Confirmed() pglogrepl.LSN                         { return pglogrepl.LSN(h.confirmed.Load()) }
func (h *drainHandler) InFlight() (int, int64)                           { return 0, 0 }
func (h *drainHandler) ObserveWALEnd(pglogrepl.LSN)                      {}
func (h *drainHandler) WaitRoom(context.Context, time.Time) bool         { return true }
func (h *drainHandler) WaitDrained(context.Context) error                { return nil }
func (h *drainHandler) WaitRoomFor(context.Context, time.Time, int) bool { return true }
