package faultsuite

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/verify"
)

// This file is issue 33's item 3: a failover of an HA pair (Postgres 17+
// failover slots) loses nothing and invents nothing. A real primary and
// hot standby (physical slot, online base backup, standby.signal,
// primary_conninfo with dbname, sync_replication_slots=on), the logical
// slot a FAILOVER slot, synchronized_standby_slots on the primary naming
// the standby's physical slot; writers commit, walrelay runs on a
// multi-host DSN (target_session_attrs=primary); the primary's walsender
// to the standby is frozen for a while (a lagging standby, so that the failover
// discards transactions the old primary committed), the primary is killed
// (SIGKILL of every server process) and the standby promoted; writers and
// walrelay go on against the new primary on their own.

// standbySlot is the standby's physical slot on the primary.
const standbySlot = "failover_standby"

// pgBin is a Postgres major's server bin directory.
type pgBin struct {
	major int
	dir   string
}

// failoverBins returns the Postgres 17 and 18 bin directories
// (testenv.MajorBinDir: skipped when one is missing, failed under make
// test, which installs both), and where it looked, for skip messages.
func failoverBins(t *testing.T) ([]pgBin, string) {
	t.Helper()
	return []pgBin{{17, testenv.MajorBinDir(t, 17)}, {18, testenv.MajorBinDir(t, 18)}}, "testenv.MajorBinDir"
}

// failoverOpts is one failover run.
type failoverOpts struct {
	bin pgBin
	d   delivery
	// synchronized sets synchronized_standby_slots on the primary (what
	// walrelay requires of an HA pair); without it walrelay may receive,
	// and publish, transactions the standby never got.
	synchronized bool
	// restart: walrelay is SIGKILLed with the primary and a new process
	// started after the promotion (what an orchestrator does when both
	// ran on the failed node), instead of one process following it.
	restart bool
}

// failoverResult is what a run measured.
type failoverResult struct {
	rep  verify.Report
	read kafkaRead
	// discarded: events the old primary committed (its writers saw the
	// COMMIT succeed) that the new primary does not have: the failover
	// threw them away (asynchronous physical replication).
	discarded int
	// invented: records on Kafka of discarded events.
	invented int
	// dupsBeforeKill: duplicates whose first copy was on Kafka before the
	// kill (re-sent from the synced slot's position on the new primary).
	dupsBeforeKill int
	// deliveredAtKill: records on Kafka at the kill.
	deliveredAtKill int64
	// syncedBehind: the WAL between the synced slot copy's position and
	// what the standby had received, at the kill.
	syncedBehind uint64
	recovery     time.Duration // promotion → new primary's WAL confirmed
	jumped       string        // the slot record's jump, if it was marked
	// resumed: what the relay said of the checkpoint after the promotion
	// (exactly-once delivery).
	resumed string
	txns    int // writers' committed transactions
}

// runFailover runs one failover and checks what holds in every run: the
// relay followed the promotion on its own, nothing of the new primary is
// lost, per-key order holds, the failover discarded some committed
// transactions (else the run proves nothing about inventing). What depends on
// synchronized_standby_slots and the delivery mode (invented, duplicates)
// the caller checks. With synchronized_standby_slots the relay must not
// take its own failover slot for one moved by someone else.
func runFailover(t *testing.T, o failoverOpts) failoverResult {
	t.Helper()
	primary := testenv.PrivateCluster(t, localpg.Options{BinDir: o.bin.dir})
	if v := testenv.QueryValue[int](t, primary.DSN(""), `SELECT current_setting('server_version_num')::int / 10000`); v < 17 {
		t.Skipf("failover slots need Postgres 17 or newer; %s runs %d", o.bin.dir, v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	standby, err := primary.NewStandby(ctx, localpg.StandbyOptions{Slot: standbySlot, Settings: map[string]string{"sync_replication_slots": "on"}})
	if err != nil {
		t.Fatalf("making the standby: %v", err)
	}
	t.Cleanup(func() {
		if err := standby.Close(); err != nil {
			t.Errorf("closing the standby: %v", err)
		}
	})
	if o.synchronized {
		// After the base backup: a standby that inherited the setting
		// would, once promoted, wait for a slot it does not have.
		testenv.Exec(t, primary.DSN(""), `ALTER SYSTEM SET synchronized_standby_slots = '`+standbySlot+`'`)
		testenv.Exec(t, primary.DSN(""), `SELECT pg_reload_conf()`)
	}
	dsn := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=%s dbname=postgres sslmode=disable target_session_attrs=primary connect_timeout=5",
		primary.Port(), standby.Port(), localpg.User)
	slot := slotFor(dsn)
	f := newFixtureOn(t, dsn, o.d)
	requireFailoverSlot(t, primary.DSN(""), slot)

	w := startWorkload(t, dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 300, time.Minute)
	// The standby's copy of the slot: synced, persistent (a temporary one
	// is dropped at promotion), and at a recent position.
	recent := mustSlot(t, dsn).confirmed
	waitSynced(t, primary.DSN(""), standby.DSN(""), slot, recent)

	// A lagging standby: the primary's walsender to it frozen while the
	// writers commit on the primary (frozen on the standby's side, the WAL
	// already sent would still reach it from the socket's buffers). With
	// synchronized_standby_slots the primary's walsender sends walrelay
	// nothing past what the standby flushed.
	sender := testenv.QueryValue[int](t, primary.DSN(""), `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, standbySlot)
	if err := syscall.Kill(sender, syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing the primary's walsender to the standby (pid %d): %v", sender, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := primary.Kill(); err != nil {
		t.Fatalf("killing the primary: %v", err)
	}
	procs := []*relayProc{p}
	if o.restart {
		p.kill()
	}
	atKill, err := endOffsetSum(t.Context(), f.adm)
	if err != nil {
		t.Fatalf("reading the end offsets at the kill: %v", err)
	}
	endsAtKill, err := listEnds(t.Context(), f.adm, false)
	if err != nil {
		t.Fatalf("listing the end offsets at the kill: %v", err)
	}
	syncedAt, received := syncedPosition(t, standby.DSN(""), slot)
	if err := standby.Promote(ctx); err != nil {
		t.Fatalf("promoting the standby: %v", err)
	}
	promoted := time.Now()
	if o.restart {
		p = startRelay(t, "relay2", f.env)
		procs = append(procs, p)
	}
	// walrelay and the writers find the new primary through the DSN.
	target := testenv.ParseLSN(t, testenv.QueryValue[string](t, standby.DSN(""), `SELECT pg_current_wal_lsn()::text`))
	recovery := waitConfirmed(t, dsn, target, promoted, time.Minute)
	requireRunning(t, p, "across the failover")
	waitPublished(t, f.adm, published(t, f.adm)+300, time.Minute)

	w.stop()
	committed, failed, rolledBack := w.stats()
	t.Logf("writers: %d transactions committed, %d failed, %d rolled-back rows", committed, failed, len(rolledBack))
	testenv.WaitCaughtUp(t, dsn, slotFor(dsn), time.Minute)
	read := readKafka(t, f.broker.Addrs(), o.d == exactlyOnce)
	ledger := readLedger(t, standby.DSN(""))
	jumped := testenv.QueryValue[string](t, standby.DSN(""), `SELECT coalesce((SELECT coalesce(jump, '') FROM `+slotrecord.TableName+` WHERE slot_name = $1), 'no record')`, slot)
	stopClean(t, p)
	logged := slices.ContainsFunc(procs, func(p *relayProc) bool { return p.logHas("moved past walrelay's record") })
	resumed := checkpointLines(p)

	// The old primary, restarted alone (crash recovery) once walrelay and
	// the writers are gone, says which committed events the failover
	// discarded.
	if err := primary.Restart(ctx); err != nil {
		t.Fatalf("restarting the old primary: %v", err)
	}
	onNew := map[string]bool{}
	for _, e := range ledger {
		onNew[e.ID] = true
	}
	discarded := map[string]bool{}
	for _, e := range readLedger(t, primary.DSN("")) {
		if !onNew[e.ID] {
			discarded[e.ID] = true
		}
	}

	res := failoverResult{read: read, discarded: len(discarded), deliveredAtKill: atKill, recovery: recovery, jumped: jumped, txns: committed, resumed: resumed}
	res.rep = verify.Check(ledger, rolledBack, read.records)
	if received > syncedAt {
		res.syncedBehind = uint64(received - syncedAt)
	}
	for _, r := range read.records {
		if discarded[r.ID] {
			res.invented++
		}
	}
	res.dupsBeforeKill = dupCopiesBeforeKill(read.records, endsAtKill)
	if o.d == exactlyOnce {
		t.Logf("the relay on the checkpoint after the promotion: %s", resumed)
	}
	t.Logf("Postgres %d, %s, synchronized_standby_slots %t: %s; %d committed events discarded by the failover, %d of them on Kafka; %d records on Kafka at the kill; synced slot %d bytes behind the standby's received WAL (%s) at the kill; %d duplicates of events on Kafka before the kill; relay back %s after the promotion",
		o.bin.major, o.d.reader(), o.synchronized, res.rep, res.discarded, res.invented, atKill, res.syncedBehind, received, res.dupsBeforeKill, recovery.Round(time.Millisecond))

	if committed == 0 || len(rolledBack) == 0 {
		t.Errorf("writers committed %d transactions and rolled back %d rows: the run proves little", committed, len(rolledBack))
	}
	if res.discarded == 0 {
		t.Errorf("the failover discarded no committed event: the frozen walsender did not make the standby lag, and nothing could have been invented")
	}
	if res.rep.Lost != 0 || res.rep.Misrouted != 0 || res.rep.Corrupted != 0 || res.rep.OrderViolations != 0 {
		t.Errorf("verify against the new primary's ledger: %s; lost e.g. %v; %v", res.rep, res.rep.LostIDs, res.rep.Problems)
	}
	if res.rep.Invented != res.invented+res.rep.RolledBack {
		t.Errorf("%d records of ids the new primary does not have, %d of them of events the failover discarded and %d rolled back: the others come from nowhere (%v)",
			res.rep.Invented, res.invented, res.rep.RolledBack, res.rep.InventedIDs)
	}
	if res.rep.RolledBack != 0 {
		t.Errorf("%d records of rolled-back events", res.rep.RolledBack)
	}
	// Without synchronized_standby_slots walrelay cannot know which
	// standby must have its record before the slot moves: the synced copy
	// may be past the record the standby has (not asserted).
	if o.synchronized && (jumped != "" || logged) {
		t.Errorf("the relay took its failover slot for one moved by someone else: record's jump %q, logged %t", jumped, logged)
	}
	return res
}

// requireFailoverSlot checks that walrelay setup made walrelay's slot a
// FAILOVER slot (postgres.slot_failover's default, auto, on a 17+ primary).
func requireFailoverSlot(t *testing.T, dsn, slot string) {
	t.Helper()
	if !testenv.SlotFailover(t, dsn, slot) {
		t.Fatalf("walrelay setup (postgres.slot_failover=auto) did not make slot %s a failover slot on Postgres 17+", slot)
	}
}

// waitSynced waits until the standby holds a synced, persistent copy of
// slot at or past at (the slot-sync worker of sync_replication_slots
// copies it). The copy stays temporary until the primary's slot has a
// restart_lsn past what the copy reserved, which moves only at a
// running-transactions record: the primary logs one every 15 seconds,
// and the sync worker naps up to 30 seconds when nothing changed, so
// on a loaded machine a minute was not always enough (CI). The wait asks
// the primary for such a record every second (pg_log_standby_snapshot),
// as walrelay does when it creates a slot on a standby.
func waitSynced(t *testing.T, primaryDSN, standbyDSN, slot string, at pglogrepl.LSN) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		var synced, temporary bool
		var confirmed string
		err := queryRow(t.Context(), standbyDSN, `SELECT synced, temporary, coalesce(confirmed_flush_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1`,
			[]any{slot}, &synced, &temporary, &confirmed)
		if err == nil {
			if lsn, perr := pglogrepl.ParseLSN(confirmed); perr == nil && synced && !temporary && lsn >= at {
				return
			}
			last = fmt.Sprintf("synced %t, temporary %t, confirmed_flush_lsn %s", synced, temporary, confirmed)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby has no synced persistent copy of slot %s at %s or later within 2 minutes: %s", slot, at, last)
		}
		var lsn string
		if err := queryRow(t.Context(), primaryDSN, `SELECT pg_log_standby_snapshot()::text`, nil, &lsn); err != nil {
			last += "; pg_log_standby_snapshot on the primary: " + err.Error()
		}
		time.Sleep(time.Second)
	}
}

// syncedPosition returns the standby's synced copy's confirmed_flush_lsn
// and the WAL the standby received.
func syncedPosition(t *testing.T, standbyDSN, slot string) (confirmed, received pglogrepl.LSN) {
	t.Helper()
	var c, r string
	if err := queryRow(t.Context(), standbyDSN, `SELECT confirmed_flush_lsn::text, pg_last_wal_receive_lsn()::text FROM pg_replication_slots WHERE slot_name = $1`,
		[]any{slot}, &c, &r); err != nil {
		t.Fatalf("reading the synced slot on the standby: %v", err)
	}
	return testenv.ParseLSN(t, c), testenv.ParseLSN(t, r)
}

func queryRow(ctx context.Context, dsn, sql string, args []any, dst ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dst...)
}

// dupCopiesBeforeKill counts the copies beyond the first of events whose
// first copy was on Kafka at the kill (below its partition's end offset
// then).
func dupCopiesBeforeKill(records []verify.Record, ends kadm.ListedOffsets) int {
	sorted := slices.Clone(records)
	slices.SortFunc(sorted, func(a, b verify.Record) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	first := map[string]verify.Record{}
	n := 0
	for _, r := range sorted {
		f, seen := first[r.ID]
		if !seen {
			first[r.ID] = r
			continue
		}
		if e, ok := ends.Lookup(f.Topic, f.Partition); ok && f.Offset < e.Offset {
			n++
		}
	}
	return n
}

// checkFailover checks what depends on synchronized_standby_slots and the
// delivery mode: with it, no record of a discarded event (invented 0);
// exactly once, no duplicate; at least once, duplicates only of events on
// Kafka before the kill (what the relay sends again from the synced
// slot's position).
func checkFailover(t *testing.T, o failoverOpts, res failoverResult) {
	t.Helper()
	if o.synchronized && res.invented != 0 {
		t.Errorf("%d records of events the new primary does not have (the failover discarded them), with synchronized_standby_slots set", res.invented)
	}
	if o.d == exactlyOnce && o.synchronized && res.rep.Duplicates != 0 {
		t.Errorf("%d duplicates (read_committed) under exactly-once delivery, e.g. %v", res.rep.Duplicates, res.rep.DuplicateIDs)
	}
	if res.rep.Duplicates != res.dupsBeforeKill {
		t.Errorf("%d duplicates, only %d of them of events on Kafka before the kill: the others were published twice after the failover (%v)", res.rep.Duplicates, res.dupsBeforeKill, res.rep.DuplicateIDs)
	}
}

// testFailover is the fault suite's failover row (synchronized_standby_slots
// set, on the oldest major found of 17 and 18).
func testFailover(t *testing.T, row *result, d delivery) {
	bins, looked := failoverBins(t)
	if len(bins) == 0 {
		t.Skipf("failover slots need Postgres 17 or newer: no server binaries at %s (make pg-majors installs them)", looked)
	}
	o := failoverOpts{bin: bins[0], d: d, synchronized: true}
	res := runFailover(t, o)
	checkFailover(t, o, res)
	fill(row, res.rep, res.read)
	row.recovery = res.recovery
	row.notes = failoverNotes(o, res)
}

func failoverNotes(o failoverOpts, res failoverResult) string {
	sync := "synchronized_standby_slots = the standby's slot"
	if !o.synchronized {
		sync = "without synchronized_standby_slots"
	}
	notes := fmt.Sprintf("Postgres %d primary + hot standby (sync_replication_slots, FAILOVER slot), %s; the primary's walsender to the standby frozen 1.5s, primary SIGKILLed, standby promoted; walrelay on a multi-host DSN (target_session_attrs=primary); %d events committed on the old primary discarded by the failover, %d of them delivered (invented); %d duplicates, all of events on Kafka before the kill (the synced slot was %d bytes of WAL behind the standby at the kill)",
		o.bin.major, sync, res.discarded, res.invented, res.rep.Duplicates, res.syncedBehind)
	if o.d == exactlyOnce {
		notes += "; after the promotion the relay: " + res.resumed
	}
	return notes + "; recovery = promotion → new primary's WAL confirmed"
}

// TestFailover runs the failover on every major of 17 and 18 found, in
// both delivery modes, with synchronized_standby_slots.
func TestFailover(t *testing.T) {
	runFailovers(t, func(bins []pgBin, d delivery) []failoverOpts {
		var runs []failoverOpts
		for _, b := range bins {
			runs = append(runs, failoverOpts{bin: b, d: d, synchronized: true})
		}
		return runs
	})
}

// TestFailoverRelayRestarted: walrelay is killed with the primary and a
// new process starts after the promotion, on the oldest major found: it
// starts from the synced slot and, exactly once, from the checkpoint the
// killed one committed on the old timeline.
func TestFailoverRelayRestarted(t *testing.T) {
	runFailovers(t, func(bins []pgBin, d delivery) []failoverOpts {
		return []failoverOpts{{bin: bins[0], d: d, synchronized: true, restart: true}}
	})
}

// TestFailoverWithoutSynchronizedStandbySlots runs the failover on the
// oldest major found without synchronized_standby_slots, where walrelay
// receives transactions the standby never got: it publishes events that
// no longer exist after the failover (invented), which the run requires
// to happen (the reason walrelay check asks for the setting), and still
// loses nothing.
func TestFailoverWithoutSynchronizedStandbySlots(t *testing.T) {
	runFailovers(t, func(bins []pgBin, d delivery) []failoverOpts {
		return []failoverOpts{{bin: bins[0], d: d}}
	})
}

// runFailovers runs, in parallel, the failovers runs returns for the
// majors found and each delivery mode, with their checks.
func runFailovers(t *testing.T, runs func(bins []pgBin, d delivery) []failoverOpts) {
	bins, looked := failoverBins(t)
	if len(bins) == 0 {
		t.Skipf("failover slots need Postgres 17 or newer: no server binaries at %s (make pg-majors installs them)", looked)
	}
	buildRelay(t)
	for _, d := range deliveries {
		for _, o := range runs(bins, d) {
			t.Run(fmt.Sprintf("pg%d/%s", o.bin.major, o.d), func(t *testing.T) {
				t.Parallel()
				res := runFailover(t, o)
				checkFailover(t, o, res)
				if !o.synchronized && res.invented == 0 {
					t.Errorf("without synchronized_standby_slots no discarded event reached Kafka (%d discarded): the run did not show what the setting prevents", res.discarded)
				}
				t.Logf("figures: %d events committed on the new primary, %d delivered, %d lost, %d duplicates, %d invented (of %d discarded by the failover)",
					res.rep.Committed, res.rep.Delivered, res.rep.Lost, res.rep.Duplicates, res.invented, res.discarded)
			})
		}
	}
}

// checkpointLines returns what the relay logged of the checkpoint after
// its first session (exactly-once delivery: proven, not used, ...), the
// messages joined in order.
func checkpointLines(p *relayProc) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	var msgs []string
	first := true
	for line := range strings.Lines(string(b)) {
		_, msg, ok := strings.Cut(line, `"msg":"`)
		if !ok {
			continue
		}
		msg, _, _ = strings.Cut(msg, `"`)
		switch {
		case !strings.Contains(msg, "checkpoint"), strings.HasPrefix(msg, "exactly-once delivery"), strings.HasPrefix(msg, "created the checkpoint topic"):
		case first && strings.HasPrefix(msg, "no checkpoint yet"):
			first = false
		default:
			msgs = append(msgs, msg)
		}
	}
	return strings.Join(msgs, " / ")
}

// TestSynchronizedStandbySlotsHoldOnlyFailoverSlots: Postgres holds back
// only the decoding of FAILOVER slots for the standbys named in
// synchronized_standby_slots, and walrelay's slot record waits for them
// only then. Here the setting names a standby that never connected (its
// physical slot reserves no WAL) and walrelay's slot is an ordinary one:
// the relay must confirm the WAL end as always.
func TestSynchronizedStandbySlotsHoldOnlyFailoverSlots(t *testing.T) {
	bins, looked := failoverBins(t)
	if len(bins) == 0 {
		t.Skipf("synchronized_standby_slots needs Postgres 17 or newer: no server binaries at %s (make pg-majors installs them)", looked)
	}
	buildRelay(t)
	c := testenv.PrivateCluster(t, localpg.Options{BinDir: bins[0].dir})
	testenv.Exec(t, c.DSN(""), `SELECT pg_create_physical_replication_slot('absent_standby')`)
	testenv.Exec(t, c.DSN(""), `ALTER SYSTEM SET synchronized_standby_slots = 'absent_standby'`)
	testenv.Exec(t, c.DSN(""), `SELECT pg_reload_conf()`)
	// An ordinary slot: postgres.slot_failover=false for setup and the
	// relay (auto makes, and switches on, a failover slot on 17).
	dsn := c.DSN("postgres")
	noFailover := "WALRELAY_POSTGRES_SLOT_FAILOVER=false"
	runCLI(t, []string{"WALRELAY_POSTGRES_DSN=" + dsn, "WALRELAY_POSTGRES_SLOT=" + slotFor(dsn), noFailover}, "setup")
	testenv.Exec(t, dsn, workloadSchema)
	b := testenv.Kafka(t)
	f := &fixture{dsn: dsn, broker: b, d: atLeastOnce, env: append(relayEnv(dsn, b.Addrs(), atLeastOnce), noFailover), adm: kadm.NewClient(b.Client(t))}
	if testenv.SlotFailover(t, f.dsn, slotFor(f.dsn)) {
		t.Fatal("walrelay setup created a failover slot; this test needs an ordinary one")
	}
	w := startWorkload(t, f.dsn, defaultLoad)
	p := startRelay(t, "relay", f.env)
	waitPublished(t, f.adm, 300, time.Minute)
	rep, _ := f.verify(t, w) // waits until the slot is confirmed to the WAL end
	stopClean(t, p)
	t.Logf("Postgres %d, synchronized_standby_slots naming an absent standby, ordinary slot: %s", bins[0].major, rep)
}

// TestSlotRecordCheckedAtEverySession: a session checks the slot against
// walrelay's record on the server it streams from, also when the record's
// connection is to a server that went away meanwhile (a failover, a
// restart) and nothing in flight made the relay notice it before: an idle
// relay, Postgres restarted under it.
func TestSlotRecordCheckedAtEverySession(t *testing.T) {
	buildRelay(t)
	c := testenv.PrivateCluster(t, localpg.Options{})
	f := newFixtureOn(t, c.DSN("postgres"), atLeastOnce)
	p := startRelay(t, "relay", f.env)
	w := startWorkload(t, f.dsn, workloadOpts{writers: 1, pause: 50 * time.Millisecond})
	waitPublished(t, f.adm, 50, time.Minute)
	w.stop()
	testenv.WaitCaughtUp(t, f.dsn, slotFor(f.dsn), time.Minute)
	time.Sleep(500 * time.Millisecond) // idle: the recorder has nothing to write
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx, "immediate"); err != nil {
		t.Fatalf("stopping postgres: %v", err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restarting postgres: %v", err)
	}
	testenv.Exec(t, f.dsn, `SELECT pg_logical_emit_message(false, 'nudge', '')`)
	testenv.WaitCaughtUp(t, f.dsn, slotFor(f.dsn), time.Minute)
	requireRunning(t, p, "across the restart")
	stopClean(t, p)
	if p.logHas("reading walrelay's record of the slot at the session's start") {
		t.Errorf("the session after the restart did not check the slot against walrelay's record (it read it on the connection to the server before the restart): %s",
			tailFile(p.logPath, 5))
	}
}
