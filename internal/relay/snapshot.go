// The initial snapshot (snapshot.mode=initial) and the backfill of
// `walrelay snapshot`: rows already in the outbox, read in one Postgres
// snapshot by internal/snapshot, routed and produced as the stream's INSERTs
// are, and waited for until Kafka acknowledged every one.

package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/snapshot"
)

// snapshotState is what Relay knows of its snapshot.
type snapshotState struct {
	// needed is set by prepare when the slot is missing, create_slot is on
	// and snapshot.mode is initial.
	needed bool
	// progress is read by /status, the metrics and the progress log.
	progress snapshot.Progress
	// report, when set, is called with the progress every
	// snapshot.progress_interval and once at the end, instead of logging
	// it (walrelay snapshot prints it on stderr).
	report func(snapshot.Status)
}

// SnapshotStatus is the progress of the snapshot this relay runs or ran;
// the zero Status when it has none.
func (r *Relay) SnapshotStatus() snapshot.Status {
	return r.current().snap.progress.Status(time.Now())
}

// snapshotTables converts the tables prepare bound.
func (r *Relay) snapshotTables() ([]snapshot.Table, error) {
	if len(r.tables) == 0 {
		var listed []string
		for _, t := range r.cfg.Postgres.Tables() {
			listed = append(listed, t.Quoted())
		}
		return nil, fmt.Errorf("%w: the publications %q contain no table: ALTER PUBLICATION ... ADD TABLE %s; (postgres.table's tables), or run `walrelay setup`",
			snapshot.ErrNoTable, r.cfg.Postgres.Publications, strings.Join(listed, ", "))
	}
	out := make([]snapshot.Table, len(r.tables))
	for i, rel := range r.tables {
		cols := make([]string, len(rel.Columns))
		for j, c := range rel.Columns {
			cols[j] = c.Name
		}
		out[i] = snapshot.Table{Schema: rel.Namespace, Name: rel.Name, OID: rel.ID, Columns: cols}
	}
	return out, nil
}

// checkSnapshot fails at startup, before any slot or snapshot exists, on a
// table without a primary key or a filter Postgres rejects.
func (r *Relay) checkSnapshot(ctx context.Context, conn *pgx.Conn, where string) error {
	tables, err := r.snapshotTables()
	if err != nil {
		return err
	}
	rd, err := snapshot.Open(ctx, conn, "")
	if err != nil {
		return err
	}
	defer func() { _ = rd.Close(context.WithoutCancel(ctx)) }()
	for _, t := range tables {
		if _, err := rd.Check(ctx, t, where); err != nil {
			return err
		}
	}
	return nil
}

// initialSnapshot publishes the outbox's rows as of the slot's creation,
// then creates the slot at the snapshot's consistent point, so that the
// stream starts with exactly the transactions the snapshot did not see.
// Another process snapshotting the same slot is waited for (advisory
// lock); if it created the slot meanwhile, this one streams from it and
// snapshots nothing. Interrupted (a stop, an error, a crash), it leaves no
// slot: the next start snapshots again from the beginning.
func (r *Relay) initialSnapshot(ctx context.Context) error {
	slot := r.cfg.Postgres.Slot
	conn, err := snapshot.Connect(ctx, r.cfg.Postgres.DSN)
	if err != nil {
		return postgres.ExplainConnectError(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r.log.Info("initial snapshot: taking the snapshot lock of the slot (another process snapshotting it is waited for)", "slot", slot)
	if err := snapshot.Lock(ctx, conn, slot); err != nil {
		return err
	}
	// Someone may have created the slot while this process waited.
	switch s, err := postgres.InspectSlot(ctx, conn, slot); {
	case err == nil:
		db, err := postgres.CurrentDatabase(ctx, conn)
		if err != nil {
			return err
		}
		if p := s.Problem(db); p != "" {
			return fmt.Errorf("%w: %s", ErrSlotMismatch, p)
		}
		r.log.Info("initial snapshot not needed: another process created the slot meanwhile", "slot", slot, "confirmed_flush_lsn", s.ConfirmedFlushLSN)
		if s.ConfirmedFlushLSN != "" {
			lsn, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
			if err != nil {
				return fmt.Errorf("parsing confirmed_flush_lsn of slot %q: %w", slot, err)
			}
			r.tracker.SetStart(lsn)
		}
		return r.rec.found(ctx, conn)
	case !errors.Is(err, postgres.ErrSlotNotFound):
		return err
	}
	tmp, err := tempSlotName()
	if err != nil {
		return err
	}
	var exp *snapshot.Exported
	err = r.creatingSlot(ctx, tmp, func() (err error) {
		exp, err = snapshot.Export(ctx, r.cfg.Postgres.DSN, tmp)
		return err
	})
	if err != nil {
		return err
	}
	defer func() { _ = exp.Close(context.WithoutCancel(ctx)) }()
	r.log.Info("initial snapshot: exported", "temporary_slot", tmp, "consistent_lsn", exp.LSN.String(), "snapshot", exp.Name)
	rows, err := r.publishSnapshot(ctx, conn, exp.Name, exp.LSN, r.cfg.Snapshot.Where, false)
	if err != nil {
		return fmt.Errorf("initial snapshot (no slot was created; the next start snapshots again): %w", err)
	}
	if err := exp.Persist(ctx, conn, slot); err != nil {
		return err
	}
	// pg_copy_logical_replication_slot never copies failover: switch it
	// on (postgres.slot_failover). Failing that, the next start does.
	if r.fslot.on {
		if err := postgres.EnableFailover(ctx, conn, slot); err != nil {
			r.log.Warn("could not switch failover on for the slot the initial snapshot created; the next start tries again", "slot", slot, "err", err)
		}
	}
	if err := r.rec.created(ctx, conn, exp.LSN, "walrelay run (initial snapshot)"); err != nil {
		return err
	}
	if err := exp.Close(ctx); err != nil {
		r.log.Warn("closing the snapshot's replication connection", "err", err)
	}
	r.tracker.SetStart(exp.LSN)
	r.log.Info("initial snapshot done: created the slot at its consistent point; streaming from there", "slot", slot, "lsn", exp.LSN.String(), "rows", rows)
	return nil
}

// tempSlotName is a fresh name for the snapshot's temporary slot: one
// per attempt, so a dying walsender still holding the last attempt's slot
// is no obstacle.
func tempSlotName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("naming the snapshot's temporary slot: %w", err)
	}
	return "walrelay_snapshot_" + hex.EncodeToString(b[:]), nil
}

// publishSnapshot reads the tables' rows matching where in snapshot name
// (a snapshot of its own when empty) and hands each to the stream's
// handler as a row of one tracked transaction ending at lsn, within the
// in-flight caps. It returns once the broker acknowledged every record
// (dead letters included), with the rows read; the transaction that read
// them ends as soon as they are read, releasing its xmin horizon.
//
// With dryRun it only counts: it returns the rows it would publish.
func (r *Relay) publishSnapshot(ctx context.Context, conn *pgx.Conn, name string, lsn pglogrepl.LSN, where string, dryRun bool) (int64, error) {
	spec := func(*snapshot.Reader) (readPlan, error) { return readPlan{where: where}, nil }
	if dryRun {
		return r.countRead(ctx, conn, name, spec)
	}
	return r.publishRead(ctx, conn, name, lsn, spec)
}

// readPlan is which rows to read (where), in which order (nil: table by
// table, each in primary-key order; otherwise merged across the tables by
// snapshot.Reader.MergeOrdered), and the event ids of rows not to publish
// (already on Kafka).
type readPlan struct {
	where string
	order []snapshot.OrderKey
	skip  map[string]struct{}
	// skipped, when set, counts the rows not published for skip.
	skipped *int64
}

// readSpec says, in the snapshot, what to read.
type readSpec func(rd *snapshot.Reader) (readPlan, error)

// countRead is publishRead's dry run: the rows it would publish.
func (r *Relay) countRead(ctx context.Context, conn *pgx.Conn, name string, spec readSpec) (int64, error) {
	return r.readRows(ctx, conn, name, 0, spec, true)
}

// publishRead is publishSnapshot with the rows spec selects.
func (r *Relay) publishRead(ctx context.Context, conn *pgx.Conn, name string, lsn pglogrepl.LSN, spec readSpec) (int64, error) {
	return r.readRows(ctx, conn, name, lsn, spec, false)
}

func (r *Relay) readRows(ctx context.Context, conn *pgx.Conn, name string, lsn pglogrepl.LSN, spec readSpec, dryRun bool) (int64, error) {
	tables, err := r.snapshotTables()
	if err != nil {
		return 0, err
	}
	rd, err := snapshot.Open(ctx, conn, name)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rd.Close(context.WithoutCancel(ctx)) }()
	rp, err := spec(rd)
	if err != nil {
		return 0, err
	}
	where, order := rp.where, rp.order
	pks := make([][]string, len(tables))
	var total int64
	for i, t := range tables {
		if pks[i], err = rd.Check(ctx, t, where); err != nil {
			return 0, err
		}
		n, err := rd.Count(ctx, t, where)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if dryRun {
		return total, nil
	}
	p := &r.snap.progress
	p.Start(total, time.Now())
	r.log.Info("snapshot: publishing rows", "rows", total, "tables", len(tables), "where", where)
	stopProgress := r.reportProgress(ctx)
	defer stopProgress()

	h := r.handler
	tx := r.tracker.BeginAt(time.Time{})
	h.tx, h.commitTime, h.commitAt, h.final = tx, time.Now(), r.clock.now(), lsn
	plans := make([]*router.Plan, len(tables))
	msgs := make([]*pglogrepl.RelationMessage, len(tables))
	for i, t := range tables {
		if plans[i], err = r.router.Bind(r.tables[i]); err != nil {
			r.tracker.Abort(tx)
			h.tx = nil
			return 0, fmt.Errorf("binding %s: %w", t, err)
		}
		msgs[i] = relationMessage(r.tables[i])
	}
	var rows int64
	publish := func(i int, cols []*pglogrepl.TupleDataColumn) error {
		if rp.skip != nil {
			if _, ok := rp.skip[plans[i].EventID(cols)]; ok {
				p.Done() // on Kafka already
				if rp.skipped != nil {
					*rp.skipped++
				}
				return nil
			}
		}
		for !r.tracker.WaitRoom(ctx, time.Now().Add(100*time.Millisecond)) {
			if ferr := r.fail.err(); ferr != nil {
				return ferr
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if err := h.publishRow(ctx, msgs[i], plans[i], cols, lsn, nil); err != nil {
			return err
		}
		rows++
		p.Done()
		return nil
	}
	if order != nil {
		// One sequence across the tables (a heal: commit order).
		err = rd.MergeOrdered(ctx, tables, where, order, pks, r.cfg.Snapshot.ChunkRows, publish)
	} else {
		for i, t := range tables {
			if err = rd.Scan(ctx, t, where, pks[i], r.cfg.Snapshot.ChunkRows, func(cols []*pglogrepl.TupleDataColumn) error {
				return publish(i, cols)
			}); err != nil {
				break
			}
		}
	}
	if err != nil {
		r.tracker.Abort(tx)
		h.tx = nil
		return rows, err
	}
	if err := rd.Close(ctx); err != nil {
		r.log.Warn("ending the snapshot transaction", "err", err)
	}
	r.tracker.Commit(tx, lsn)
	h.tx = nil
	r.delivery.commit(lsn, eoscheckpoint.Last{}) // with exactly-once delivery the checkpoint ends at lsn
	if err := (failureAware{Tracker: r.tracker, fail: &r.fail}).WaitDrained(ctx); err != nil {
		return rows, fmt.Errorf("waiting for kafka to acknowledge the snapshot's records: %w", err)
	}
	if ferr := r.fail.err(); ferr != nil {
		return rows, ferr
	}
	p.End(time.Now())
	stopProgress()
	return rows, nil
}

// reportProgress logs (or reports) the snapshot's progress every
// snapshot.progress_interval until the returned function is called, which
// reports it once more.
func (r *Relay) reportProgress(ctx context.Context) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	report := r.snap.report
	if report == nil {
		report = func(s snapshot.Status) {
			r.log.Info("snapshot progress", "rows_done", s.Done, "rows_total", s.Total,
				"rows_per_second", int64(s.Rate), "eta", s.ETA.String(), "elapsed", s.Elapsed.Round(time.Millisecond).String())
		}
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(r.cfg.Snapshot.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report(r.snap.progress.Status(time.Now()))
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var once bool
	return func() {
		if once {
			return
		}
		once = true
		close(done)
		<-stopped
		report(r.snap.progress.Status(time.Now()))
	}
}

// relationMessage is rel as the pgoutput Relation message a dead letter
// is built from.
func relationMessage(rel router.Relation) *pglogrepl.RelationMessage {
	m := &pglogrepl.RelationMessage{RelationID: rel.ID, Namespace: rel.Namespace, RelationName: rel.Name, ColumnNum: uint16(len(rel.Columns))}
	for _, c := range rel.Columns {
		m.Columns = append(m.Columns, &pglogrepl.RelationMessageColumn{Name: c.Name, DataType: c.TypeOID, TypeModifier: c.TypeModifier})
	}
	return m
}

// BackfillResult is what Backfill did.
type BackfillResult struct {
	Tables []string `json:"tables"`
	Where  string   `json:"where"`
	// Rows is how many rows were published and acknowledged (with DryRun,
	// how many would be).
	Rows    int64         `json:"rows"`
	DryRun  bool          `json:"dry_run"`
	Elapsed time.Duration `json:"-"`
	Seconds float64       `json:"seconds"`
}

// Backfill publishes the published tables' rows (only those of tables,
// when not empty: each must be published) matching where, read in
// one REPEATABLE READ snapshot of its own, through the relay's router,
// converters, relay.on_error and producer, and returns once Kafka
// acknowledged every record (walrelay snapshot). It is not coordinated
// with the slot: a row the slot also sends (committed after the slot's
// confirmed position and before the snapshot) is published by both; no
// row visible to the snapshot is missed. It neither needs nor touches
// the slot. report, when not nil, gets the progress every
// snapshot.progress_interval and at the end. Call it instead of Run, once.
func (r *Relay) Backfill(ctx context.Context, where string, tables []string, dryRun bool, report func(snapshot.Status)) (BackfillResult, error) {
	defer r.closePublisher()
	res := BackfillResult{Where: where, DryRun: dryRun}
	if r.delivery.noDuplicates() {
		return res, errors.New("walrelay snapshot publishes with at-least-once delivery: run it with relay.delivery=at_least_once (consumers dedupe on the id header)")
	}
	r.snap.report = report
	conn, err := snapshot.Connect(ctx, r.cfg.Postgres.DSN)
	if err != nil {
		return res, postgres.ExplainConnectError(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := r.checkPublications(ctx, conn); err != nil {
		return res, err
	}
	if err := r.onlyTables(tables); err != nil {
		return res, err
	}
	for _, t := range r.tables {
		res.Tables = append(res.Tables, t.Namespace+"."+t.Name)
	}
	if !dryRun {
		if err := r.pub.CheckAccess(ctx, 10*time.Second); err != nil {
			return res, err
		}
	}
	dlqCtx, stopDLQ := context.WithCancel(context.WithoutCancel(ctx))
	dlqDone := make(chan struct{})
	go func() {
		defer close(dlqDone)
		r.runDeadLetters(dlqCtx)
	}()
	defer func() { stopDLQ(); <-dlqDone }()
	start := time.Now()
	res.Rows, err = r.publishSnapshot(ctx, conn, "", 0, where, dryRun)
	res.Elapsed = time.Since(start)
	res.Seconds = res.Elapsed.Seconds()
	return res, err
}

// onlyTables keeps of r.tables those named in only (as postgres.table
// writes them: "schema.name", or "name" in public); all of them when only
// is empty. A name that is not published is refused: nothing would read
// its rows, and `walrelay snapshot --table` would report success.
func (r *Relay) onlyTables(only []string) error {
	if len(only) == 0 {
		return nil
	}
	want := make(map[string]bool, len(only))
	for _, s := range only {
		schema, name, err := config.SplitTable(s)
		if err != nil {
			return fmt.Errorf("parsing table %q: %w", s, err)
		}
		want[schema+"."+name] = false
	}
	kept := r.tables[:0]
	for _, rel := range r.tables {
		n := rel.Namespace + "." + rel.Name
		if _, ok := want[n]; ok {
			want[n] = true
			kept = append(kept, rel)
		}
	}
	r.tables = kept
	var missing []string
	for n, found := range want {
		if !found {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: %s is in none of the publications %q (walrelay snapshot reads the published tables only: add it with walrelay setup, or ALTER PUBLICATION ... ADD TABLE)",
			ErrTableNotPublished, strings.Join(missing, ", "), r.cfg.Postgres.Publications)
	}
	return nil
}
