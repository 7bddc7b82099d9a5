package relay_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Decoding from a hot standby (Postgres 16+): the slot on the standby
// (postgres.dsn), the outbox, heartbeats and walrelay's slot record on the
// primary (postgres.primary_dsn). Each test makes its own primary
// (WALRELAY_PG_BIN's major) and hot standby; one run with WALRELAY_PG_BIN
// set to a 16, 17 or 18 bin directory covers that major.

// hotStandby is a private primary and a hot standby of it.
type hotStandby struct {
	primary, standby *localpg.Cluster
	version          int // server_version_num
}

func (h *hotStandby) primaryDSN() string { return h.primary.DSN("postgres") }
func (h *hotStandby) standbyDSN() string { return h.standby.DSN("postgres") }

// newHotStandby starts a primary with WALRELAY_PG_BIN's binaries and a hot
// standby of it (standbySettings over localpg's standby defaults). It
// skips when the major is outside [minMajor, maxMajor] (0: no bound).
func newHotStandby(t *testing.T, minMajor, maxMajor int, standbySettings map[string]string) *hotStandby {
	t.Helper()
	p := testenv.PrivateCluster(t, localpg.Options{})
	v := testenv.QueryValue[int32](t, p.DSN("postgres"), `SELECT current_setting('server_version_num')::int`)
	major := int(v) / 10000
	if minMajor > 0 && major < minMajor {
		t.Skipf("decoding from a standby needs PostgreSQL %d or newer; this server (WALRELAY_PG_BIN) is %d: run with WALRELAY_PG_BIN set to a 16, 17 or 18 bin directory", minMajor, major)
	}
	if maxMajor > 0 && major > maxMajor {
		t.Skipf("this test needs a PostgreSQL %d or older standby; this server (WALRELAY_PG_BIN) is %d", maxMajor, major)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := p.NewStandby(ctx, localpg.StandbyOptions{Settings: standbySettings})
	if err != nil {
		t.Fatalf("making a hot standby: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the standby: %v", err)
		}
	})
	return &hotStandby{primary: p, standby: s, version: int(v)}
}

// setup runs walrelay's setup with the objects on the primary and the
// slot on the standby (what `walrelay setup` does with
// postgres.primary_dsn).
func (h *hotStandby) setup(t *testing.T) []setup.Step {
	t.Helper()
	pc := testenv.Connect(t, h.primaryDSN())
	sc := testenv.Connect(t, h.standbyDSN())
	steps, err := setup.Run(t.Context(), pc, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay",
		Standby: &setup.Standby{Conn: sc, Nudge: func(ctx context.Context) {
			postgres.LogStandbySnapshots(ctx, h.primaryDSN(), time.Second, nil)
		}}})
	if err != nil {
		t.Fatalf("setup with the slot on the standby: %v", err)
	}
	return steps
}

// config is a relay config decoding from the standby, producing to broker.
func (h *hotStandby) config(broker *testenv.Broker) config.Config {
	cfg := config.Default()
	cfg.Postgres.DSN = h.standbyDSN()
	cfg.Postgres.PrimaryDSN = h.primaryDSN()
	cfg.Postgres.StatusInterval = 100 * time.Millisecond
	cfg.Postgres.MinBackoff = 50 * time.Millisecond
	cfg.Postgres.MaxBackoff = time.Second
	cfg.Metrics.SlotPollInterval = 200 * time.Millisecond
	cfg.Kafka.Brokers = broker.Addrs()
	cfg.Kafka.TopicPartitions = 4
	cfg.Relay.ShutdownTimeout = 10 * time.Second
	return cfg
}

// standbySlot is the slot's confirmed_flush_lsn on the standby ("" when
// NULL or missing).
func (h *hotStandby) standbySlot(t *testing.T) string {
	t.Helper()
	return testenv.QueryValue[string](t, h.standbyDSN(), `SELECT coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'walrelay'), '')`)
}

// The relay decoding from a standby delivers every event committed on the
// primary, in commit order per key, confirms the standby's slot past them,
// and keeps its slot record on the primary (no record write fails on the
// read-only standby).
func TestStandbyRelaysEveryEventInOrder(t *testing.T) {
	h := newHotStandby(t, 16, 0, nil)
	h.setup(t)
	broker := testenv.Kafka(t)
	cfg := h.config(broker)
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	reg := prometheus.NewRegistry()
	run := runRelay(t, cfg, logs, metrics.New(reg, "test", cfg.Postgres.Slot))
	logs.waitLog(t, "streaming from slot", nil, 60*time.Second)

	const txs, perTx = 20, 3
	for range txs {
		var stmts []string
		for j := range perTx { // one row per key per transaction
			stmts = append(stmts, insertEvent("order", fmt.Sprintf("agg-%d", j)))
		}
		execTx(t, h.primaryDSN(), stmts...)
	}
	end := testenv.QueryValue[string](t, h.primaryDSN(), `SELECT pg_current_wal_lsn()::text`)
	recs := broker.ReadAll(t, []string{"outbox.event.order"}, txs*perTx, 60*time.Second)
	if len(recs) != txs*perTx {
		t.Fatalf("got %d records, want %d", len(recs), txs*perTx)
	}
	// Per key, ids in the order the primary committed them.
	want := map[string][]string{}
	rows, err := testenv.Connect(t, h.primaryDSN()).Query(t.Context(), `SELECT aggregateid, id::text FROM outbox ORDER BY xmin::text::bigint, id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, id string
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		want[k] = append(want[k], id)
	}
	rows.Close()
	got := map[string][]string{}
	for _, r := range recs {
		got[string(r.Key)] = append(got[string(r.Key)], testenv.Header(r, "id"))
	}
	for k, ids := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(ids) {
			t.Errorf("key %s: got ids %v, want %v in commit order", k, got[k], ids)
		}
	}
	// The standby's slot confirms past the last transaction, and the
	// record on the primary is at or past the slot.
	target := mustLSN(t, end)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c := h.standbySlot(t); c != "" && mustLSN(t, c) >= target {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby's slot stayed at %q, not past the primary's %s after the last event", h.standbySlot(t), end)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The slot first, then the record: the record is at or past the slot
	// at every instant and only moves forward, so a record read after the
	// slot is at or past that reading (read the other way round, a record
	// written between the two reads lets the slot pass the older reading).
	slot := h.standbySlot(t)
	rec := testenv.QueryValue[string](t, h.primaryDSN(), `SELECT confirmed_lsn::text FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)
	if mustLSN(t, rec) < mustLSN(t, slot) {
		t.Errorf("the record on the primary (%s) is behind the standby's slot (%s)", rec, slot)
	}
	for _, msg := range []string{"recording the slot's position before confirming it; the slot is not confirmed past the record until it works", "cannot keep walrelay's record of the slot: relaying goes on, but retention stays stopped (nothing proves the slot's position); grant the role SELECT, INSERT, UPDATE on the table (sql/004_role.sql) or run walrelay setup"} {
		if l := logs.lines(msg); len(l) > 0 {
			t.Errorf("logged %q: %v", msg, l)
		}
	}
	// Idle, the relay does not write its record in a loop: each record
	// write is WAL the standby replays and reports as the new WAL end,
	// which the relay confirms; the recorder must see that only its own
	// write lies there (its WAL positions are read on the primary, whose
	// WAL the standby replays). A loop would change updated_at about
	// every 100ms.
	seen := map[string]bool{}
	for range 20 {
		seen[testenv.QueryValue[string](t, h.primaryDSN(), `SELECT updated_at::text FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`)] = true
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) > 3 {
		t.Errorf("idle for 2s, the relay wrote its record %d times (a write loop through the standby?)", len(seen)-1)
	}
	// Lag is measured against the standby's replay position: the
	// monitor's current LSN is the standby's (at most its replay
	// position now), and the lag is from the slot to it.
	st := run.relay.Status(t.Context())
	replay := mustLSN(t, testenv.QueryValue[string](t, h.standbyDSN(), `SELECT pg_last_wal_replay_lsn()::text`))
	if st.Slot.Error != "" || st.Slot.CurrentLSN == "" || mustLSN(t, st.Slot.CurrentLSN) > replay {
		t.Errorf("slot monitor on the standby: current %q (standby replayed %s), error %q", st.Slot.CurrentLSN, replay, st.Slot.Error)
	} else if lag := int64(mustLSN(t, st.Slot.CurrentLSN)) - int64(mustLSN(t, st.Slot.ConfirmedFlushLSN)); st.Slot.ConfirmedLagBytes != lag {
		t.Errorf("slot monitor: confirmed_flush lag %d, want current %s - confirmed %s = %d", st.Slot.ConfirmedLagBytes, st.Slot.CurrentLSN, st.Slot.ConfirmedFlushLSN, lag)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// Heartbeats are written on the primary and come back through the
// standby's slot, which they move while the outbox is idle.
func TestStandbyHeartbeatsMoveIdleSlot(t *testing.T) {
	h := newHotStandby(t, 16, 0, nil)
	h.setup(t)
	broker := testenv.Kafka(t)
	cfg := h.config(broker)
	cfg.Relay.HeartbeatInterval = 200 * time.Millisecond
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	reg := prometheus.NewRegistry()
	run := runRelay(t, cfg, logs, metrics.New(reg, "test", cfg.Postgres.Slot))
	waitMetric(t, reg, "walrelay_heartbeats_received_total", nil, ">= 1", func(v float64) bool { return v >= 1 })
	start := h.standbySlot(t)
	waitMetric(t, reg, "walrelay_heartbeats_received_total", nil, ">= 5", func(v float64) bool { return v >= 5 })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if now := h.standbySlot(t); now != "" && (start == "" || mustLSN(t, now) > mustLSN(t, start)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby's confirmed_flush_lsn stayed at %s while heartbeats flowed", start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l := logs.lines("emitting heartbeat (pg_logical_emit_message); will retry"); len(l) > 0 {
		t.Errorf("heartbeats failed: %v", l)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// Creating the slot on a standby waits for a running-transactions record
// from the primary; an idle primary writes none. With a primary role that
// may not run pg_log_standby_snapshot (superuser-only by default), the
// wait lasts: /readyz (Ready) says what Postgres waits for, and once the
// primary logs one the relay streams.
func TestStandbyReadyzSaysWaitingForRunningXacts(t *testing.T) {
	h := newHotStandby(t, 16, 0, nil)
	// The objects, without the slot (run creates it), and a primary role
	// that may write the record but not call pg_log_standby_snapshot.
	pc := testenv.Connect(t, h.primaryDSN())
	if _, err := setup.Run(t.Context(), pc, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay", LeaveSlot: true}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	for _, stmt := range []string{
		`CREATE ROLE writer LOGIN PASSWORD 'writer'`,
		`GRANT SELECT, INSERT, UPDATE ON walrelay_slot_positions, outbox TO writer`,
	} {
		if _, err := pc.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := pc.Exec(t.Context(), `SELECT pg_log_standby_snapshot()`); err != nil {
		t.Fatal(err)
	}
	// The primary's background writer logs a running-transactions record
	// every 15s while important WAL was written since its last one: let
	// it log the one for the setup above. From here the primary writes no
	// important WAL, so it logs none of its own.
	time.Sleep(16 * time.Second)
	// Replayed: the standby has the role and the publication.
	target := testenv.QueryValue[string](t, h.primaryDSN(), `SELECT pg_current_wal_lsn()::text`)
	deadline := time.Now().Add(30 * time.Second)
	for testenv.QueryValue[bool](t, h.standbyDSN(), `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, target) == false {
		if time.Now().After(deadline) {
			t.Fatal("the standby did not replay the setup")
		}
		time.Sleep(50 * time.Millisecond)
	}

	broker := testenv.Kafka(t)
	cfg := h.config(broker)
	u, err := url.Parse(h.primaryDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("writer", "writer")
	cfg.Postgres.PrimaryDSN = u.String()
	cfg.Postgres.CreateSlot = true
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	run := runRelay(t, cfg, logs, metrics.New(prometheus.NewRegistry(), "test", cfg.Postgres.Slot))
	logs.waitLog(t, "cannot ask the primary for a running-transactions record; the slot's creation on the standby waits until the primary writes one", nil, 30*time.Second)
	var reason string
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := run.relay.Ready(t.Context())
		if err != nil && strings.Contains(err.Error(), "waiting for a running-transactions record") {
			reason = err.Error()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready never said it waits for a running-transactions record; last: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("/readyz while waiting: %s", reason)
	// Postgres is indeed waiting: the slot exists on the standby, held by
	// the creating backend, not yet consistent (no confirmed_flush_lsn).
	if got := testenv.QueryValue[string](t, h.standbyDSN(), `SELECT coalesce((SELECT active::text || ' ' || coalesce(confirmed_flush_lsn::text, 'null') FROM pg_replication_slots WHERE slot_name = 'walrelay'), 'missing')`); got != "true null" {
		t.Errorf("while Ready says it waits, the standby's slot (active, confirmed_flush_lsn) is %q, want \"true null\"", got)
	}
	if !strings.Contains(reason, `creating slot "walrelay" on the standby`) {
		t.Errorf("Ready's reason does not name the slot being created: %s", reason)
	}
	if st := run.relay.Status(t.Context()); st.Ready || st.NotReadyReason != reason && !strings.Contains(st.NotReadyReason, "running-transactions record") {
		t.Errorf("Status while waiting: ready %v, reason %q", st.Ready, st.NotReadyReason)
	}
	// The primary logs one: the slot is created and the relay streams.
	if _, err := pc.Exec(t.Context(), `SELECT pg_log_standby_snapshot()`); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, "streaming from slot", nil, 60*time.Second)
	execTx(t, h.primaryDSN(), insertEvent("order", "after-wait"))
	broker.ReadAll(t, []string{"outbox.event.order"}, 1, 60*time.Second)
	if err := run.relay.Ready(t.Context()); err != nil && strings.Contains(err.Error(), "running-transactions") {
		t.Errorf("still waiting after the slot was created: %v", err)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// A standby of Postgres 14 or 15 cannot decode: run refuses at startup,
// clearly, before creating or reading anything (run with WALRELAY_PG_BIN
// of 14, or the default 15).
func TestStandbyTooOldRefused(t *testing.T) {
	h := newHotStandby(t, 0, 15, nil)
	pc := testenv.Connect(t, h.primaryDSN())
	if _, err := setup.Run(t.Context(), pc, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay", LeaveSlot: true}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	broker := testenv.Kafka(t)
	for _, tc := range []struct {
		name    string
		primary string
	}{{"with primary_dsn", h.primaryDSN()}, {"without primary_dsn", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.config(broker)
			cfg.Postgres.PrimaryDSN = tc.primary
			cfg.Postgres.CreateSlot = true
			logs := &logBuffer{}
			run := runRelay(t, cfg, logs, nil)
			err := run.wait(60 * time.Second)
			t.Logf("run: %v", err)
			if !errors.Is(err, relay.ErrStandbyTooOld) {
				t.Fatalf("run on a PostgreSQL %d standby returned %v, want ErrStandbyTooOld", h.version/10000, err)
			}
			for _, want := range []string{"needs PostgreSQL 16 or newer", "hot standby running PostgreSQL 1"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
			if n := testenv.QueryValue[int64](t, h.standbyDSN(), `SELECT count(*) FROM pg_replication_slots`); n != 0 {
				t.Errorf("%d slots on the standby after the refusal", n)
			}
		})
	}
}

// snapshot.mode=initial on a standby: the relay publishes the rows
// already in the outbox from a snapshot exported on the standby, creates
// the slot there at that snapshot's consistent point (asking the primary
// for a running-transactions record meanwhile), records it on the
// primary, and streams what follows.
func TestStandbyInitialSnapshot(t *testing.T) {
	h := newHotStandby(t, 16, 0, nil)
	pc := testenv.Connect(t, h.primaryDSN())
	if _, err := setup.Run(t.Context(), pc, setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay", LeaveSlot: true,
		Standby: &setup.Standby{Conn: testenv.Connect(t, h.standbyDSN())}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	execTx(t, h.primaryDSN(), insertEvent("order", "before-1"), insertEvent("order", "before-2"))
	broker := testenv.Kafka(t)
	cfg := h.config(broker)
	cfg.Postgres.CreateSlot = true
	cfg.Snapshot.Mode = config.SnapshotInitial
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", logs.String())
		}
	})
	run := runRelay(t, cfg, logs, nil)
	deadline := time.Now().Add(60 * time.Second)
	for len(logs.lines("initial snapshot done: created the slot at its consistent point; streaming from there")) == 0 {
		if run.exited() {
			t.Fatalf("the relay stopped before the initial snapshot was done: %v", run.err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the initial snapshot was not done within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	execTx(t, h.primaryDSN(), insertEvent("order", "after"))
	recs := broker.ReadAll(t, []string{"outbox.event.order"}, 3, 60*time.Second)
	var keys []string
	for _, r := range recs {
		keys = append(keys, string(r.Key))
	}
	slices.Sort(keys) // three keys: order across partitions is not defined
	if fmt.Sprint(keys) != "[after before-1 before-2]" {
		t.Errorf("records of keys %v, want after, before-1 and before-2 once each", keys)
	}
	if n := testenv.QueryValue[int64](t, h.standbyDSN(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walrelay'`); n != 1 {
		t.Errorf("%d slots walrelay on the standby, want 1", n)
	}
	if note := testenv.QueryValue[string](t, h.primaryDSN(), `SELECT note FROM walrelay_slot_positions WHERE slot_name = 'walrelay'`); note != "created by walrelay run (initial snapshot)" {
		t.Errorf("record on the primary: note %q", note)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}

// The startup refuses, in one error and before creating anything, the two
// DSN mix-ups: a standby as postgres.dsn without postgres.primary_dsn
// (nothing walrelay writes could be written), and postgres.primary_dsn set
// with a postgres.dsn that is not a standby.
func TestStandbyDSNMixUpsRefused(t *testing.T) {
	h := newHotStandby(t, 16, 0, nil)
	h.setup(t)
	broker := testenv.Kafka(t)
	for _, tc := range []struct {
		name         string
		dsn, primary string
		want         error
	}{
		{"standby without primary_dsn", h.standbyDSN(), "", relay.ErrStandbyNeedsPrimary},
		{"primary_dsn with a primary as dsn", h.primaryDSN(), h.primaryDSN(), relay.ErrNotStandby},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := h.config(broker)
			cfg.Postgres.DSN, cfg.Postgres.PrimaryDSN = tc.dsn, tc.primary
			run := runRelay(t, cfg, &logBuffer{}, nil)
			err := run.wait(60 * time.Second)
			t.Logf("run: %v", err)
			if !errors.Is(err, tc.want) {
				t.Errorf("run returned %v, want %v", err, tc.want)
			}
		})
	}
}
