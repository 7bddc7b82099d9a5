// A lost slot, and its heal from the outbox table.
//
// At start, a slot walrelay confirmed through before that is missing,
// lost (wal_status lost) or moved past walrelay's record (internal/slotrecord)
// stops the relay with an error that says what happened and the two ways
// on, unless outbox.on_slot_loss is heal (or walrelay slot heal runs):
// then the relay heals it. A missing or lost slot is created again with
// an exported snapshot, as the initial snapshot does; a jumped slot is
// kept where it is. In both, the rows of the snapshot that do not precede
// the record's covered fence (slotrecord.State.HealFence) are published
// first, oldest transaction first across every published table, and Kafka
// acknowledges them before the slot is streamed:
//
//   - every row that precedes the fence is on Kafka: the fence is covered
//     (Kafka acknowledged every transaction before its LSN, and a row
//     whose xmin precedes its xmin is one of theirs);
//   - every other row the snapshot sees is published by the heal;
//   - every transaction the snapshot does not see commits after the new
//     slot's consistent point (a created slot) or after the jumped slot's
//     position (taken before the snapshot), so the slot streams it.
//
// So nothing that is still in the table is lost. Of those rows, the ones
// whose event id is already on the topic they route to (read_committed)
// are skipped (healdedup.go: a record there proves the event delivered).
// With exactly-once delivery the heal fences the transactional id before
// that read (every earlier transaction of the id is then committed or
// aborted), and publishes through the transaction loop: Kafka
// transactions with a checkpoint at the slot's position, the last of
// them committed before the heal is recorded (publishGap). Duplicates left: rows whose record could not be found
// (dedup given up: more than dedupMaxIDs rows, no outbox.time_column, a
// broker not answering in dedupTimeout; a record timestamped more than
// dedupMargin before its row's time), and, for a jumped slot, the
// transactions committed between its position and the snapshot (streamed
// again).
// What a heal cannot see: rows deleted from the table since they were
// committed (an application that deletes its outbox row in the same
// transaction, a DELETE by an operator); nothing in the table tells they
// existed.

package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/eoscheckpoint"
	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/slotrecord"
	"github.com/walrelay/walrelay/internal/snapshot"
	"github.com/walrelay/walrelay/internal/txfence"
)

// ErrSlotLost: the slot's wal_status is lost (Postgres removed WAL it
// needed, max_slot_wal_keep_size): it cannot be streamed again.
var ErrSlotLost = errors.New("replication slot is lost")

// Heal kinds (HealResult.What).
const (
	healMissing  = "missing"
	healLost     = "lost"
	healJumped   = "jumped"
	healFailover = "failover"
)

// healPlan is set by prepare when the slot must be healed before
// streaming.
type healPlan struct {
	what string
	// inPlace: the slot exists (jumped): the gap is published and the
	// slot streamed from where it is; otherwise a new slot is created.
	inPlace bool
	why     string
}

// HealResult is what a heal did.
type HealResult struct {
	Slot string `json:"slot"`
	// What was found: missing, lost, jumped, or failover (a slot past
	// the record on a server promoted since the record was written).
	What string `json:"what"`
	// RecordLSN is the record's confirmed_lsn before the heal.
	RecordLSN string `json:"record_lsn,omitempty"`
	// FenceLSN and FenceXmin are the covered fence the heal trusted; empty
	// when none (every row was published).
	FenceLSN  string `json:"fence_lsn,omitempty"`
	FenceXmin uint64 `json:"fence_xmin,omitempty"`
	// SlotLSN is where the slot streams from after the heal.
	SlotLSN string `json:"slot_lsn"`
	// Created is whether the heal created the slot.
	Created bool `json:"created"`
	// Rows is how many outbox rows the heal published (and Kafka
	// acknowledged); OnKafka how many of the gap's rows it did not, their
	// event id being on their topic already.
	Rows    int64 `json:"rows"`
	OnKafka int64 `json:"on_kafka"`
}

// healOn reports whether a lost slot is healed rather than stopped on.
func (r *Relay) healOn() bool { return r.cfg.Outbox.OnSlotLoss == config.SlotLossHeal }

// wayOnLost is the two ways on after a missing or lost slot.
func wayOnLost(slot string, r *slotrecord.Record, lost bool) string {
	drop := ""
	if lost {
		drop = fmt.Sprintf("`walrelay slot drop %s`, then ", slot)
	}
	since := ""
	if r != nil {
		since = " committed after " + r.Confirmed.String()
	}
	return fmt.Sprintf("Two ways on: heal it from the outbox (set outbox.on_slot_loss: heal and start walrelay run again, or run `walrelay slot heal`): walrelay creates the slot again and first republishes from the outbox table the rows%s it may not have delivered (no loss while the rows are still in the table; rows already on Kafka are skipped); or accept the gap: %s`walrelay slot create %s --accept-gap` starts a new slot at the current WAL end and reports the gap: rows%s that were not published stay unpublished (`walrelay verify --republish` finds them while they are in the table), and retention stays stopped until `walrelay slot adopt %s`",
		since, drop, slot, since, slot)
}

// wayOnJumped is the two ways on after a slot moved past the record.
func wayOnJumped(slot string) string {
	return fmt.Sprintf("Two ways on: heal it from the outbox (set outbox.on_slot_loss: heal and start walrelay run again, or run `walrelay slot heal`): walrelay republishes from the outbox table the rows after its record, then streams from the slot (no loss while the rows are still in the table; rows already on Kafka are skipped); or accept the gap: `walrelay slot create %s --accept-gap` (walrelay run then relays on from the slot; retention stays stopped), then `walrelay verify --republish` over the time since the record and `walrelay slot adopt %s`", slot, slot)
}

// judgeSlot decides, after the recorder's start check (found), on an
// existing slot: a lost slot, or one past walrelay's record and not
// adopted, stops the relay (an error saying what and the two ways on) or
// is healed (healPlan). walStatus is the slot's wal_status.
func (r *Relay) judgeSlot(walStatus string) error {
	slot := r.cfg.Postgres.Slot
	st := r.rec.start
	if walStatus == "lost" {
		var rec *slotrecord.Record
		if st != nil {
			rec = st.Record
		}
		if r.healOn() {
			r.heal = &healPlan{what: healLost, why: "the slot's wal_status is lost"}
			r.log.Warn("replication slot is lost (wal_status lost): healing it from the outbox (outbox.on_slot_loss: heal)", "slot", slot)
			return nil
		}
		at := "walrelay has no record of its position"
		if rec != nil {
			at = fmt.Sprintf("walrelay had confirmed through it up to %s (recorded %s): rows committed after that may never have been published", rec.Confirmed, rec.UpdatedAt.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("%w: slot %q has wal_status lost (Postgres removed WAL it needed: max_slot_wal_keep_size, or a WAL file removed by hand); %s. %s",
			ErrSlotLost, slot, at, wayOnLost(slot, rec, true))
	}
	if st == nil {
		return nil // no record kept (the role may not): nothing to judge by
	}
	reason, uerr := st.Unproven()
	if reason != slotrecord.ReasonSlotJumped {
		return nil
	}
	switch {
	case st.Failover() && r.delivery.noDuplicates():
		// Not healed in place: the heal would publish again the
		// transactions between the slot's position and its snapshot
		// (the slot sends them too), duplicates read_committed
		// consumers see, where the checkpoint may prove nothing was
		// skipped (docs/runbook.md, "After a failover").
		return fmt.Errorf("%w: slot %q is past walrelay's record %s on a server promoted since the record was written (timeline %d, now %d): a failover slot synced ahead of the replayed record, or moved by someone else; exactly-once delivery does not heal it in place (the transactions between the slot's position and a heal's snapshot would be published twice). If the last checkpoint in relay.checkpoint_topic is at or past the slot's position %s, nothing was skipped: `walrelay slot create %s --accept-gap`, then walrelay run, walrelay verify --republish and walrelay slot adopt %s",
			slotrecord.ErrJumped, slot, st.Record.JumpedFrom, st.Record.Timeline, st.Timeline, st.SlotConfirmed, slot, slot)
	case st.Record.Accepted && r.rec.startWhy == "":
		// walrelay slot create --accept-gap: an operator's decision.
		r.log.Error("the slot's position is not one walrelay confirmed: it replaced one walrelay confirmed through, and an operator accepted the gap (walrelay slot create --accept-gap): relaying goes on, retention stays stopped until walrelay verify --republish and walrelay slot adopt",
			"slot", slot, "err", uerr)
	case st.Failover():
		// A synced failover slot can be past the record row the promoted
		// server replayed (the row commits after the position it
		// records): not proof of a loss, nor of none. Republishing the
		// rows after the record costs duplicates and stops nothing.
		r.heal = &healPlan{what: healFailover, inPlace: true, why: r.rec.startWhy}
		r.log.Warn("the slot is past walrelay's record on a server promoted since the record was written (a failover slot synced ahead of the replayed record, or moved by someone else): republishing the outbox rows after the record, then streaming from the slot",
			"slot", slot, "record_timeline", st.Record.Timeline, "timeline", st.Timeline, "found", uerr)
	case r.healOn():
		r.heal = &healPlan{what: healJumped, inPlace: true, why: r.rec.startWhy}
		r.log.Warn("the slot is past walrelay's record: healing it from the outbox (outbox.on_slot_loss: heal)", "slot", slot, "found", uerr)
	default:
		rec := st.Record
		if rec.JumpedAt == nil { // found marks it; not marked: the role may not write
			return fmt.Errorf("%w. %s", uerr, wayOnJumped(slot))
		}
		return fmt.Errorf("%w: slot %q: %s (found %s): rows committed after %s may never have been published. %s",
			slotrecord.ErrJumped, slot, rec.Jump, rec.JumpedAt.UTC().Format(time.RFC3339), rec.JumpedFrom, wayOnJumped(slot))
	}
	return nil
}

// healSlot heals the slot as r.heal says (see the file's comment) and
// returns what it did. The dead-letter worker must run.
func (r *Relay) healSlot(ctx context.Context) (HealResult, error) {
	plan := r.heal
	slot := r.cfg.Postgres.Slot
	res := HealResult{Slot: slot, What: plan.what}
	conn, err := snapshot.Connect(ctx, r.cfg.Postgres.DSN)
	if err != nil {
		return res, postgres.ExplainConnectError(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// One heal or initial snapshot of a slot at a time.
	if err := snapshot.Lock(ctx, conn, slot); err != nil {
		return res, err
	}
	if _, err := r.rec.table.Ensure(ctx, conn); err != nil {
		return res, err
	}
	st, err := slotrecord.Read(ctx, conn, r.rec.table, slot)
	if err != nil {
		return res, err
	}
	if rec := st.Record; rec != nil {
		res.RecordLSN = rec.Confirmed.String()
		if rec.JumpedAt != nil {
			res.RecordLSN = rec.JumpedFrom.String() // the record before the jump raised it
		}
	}
	fence := st.HealFence()
	if fence != nil {
		res.FenceLSN, res.FenceXmin = fence.LSN.String(), fence.Xmin
	}
	if plan.inPlace {
		if !st.SlotExists || st.SlotLost {
			return res, fmt.Errorf("healing slot %q: it was dropped or lost meanwhile: start again", slot)
		}
		r.log.Info("healing the slot: republishing the outbox rows after the record's covered fence, then streaming from the slot",
			"slot", slot, "what", plan.what, "record_lsn", res.RecordLSN, "fence_lsn", res.FenceLSN, "slot_lsn", st.SlotConfirmed.String())
		if err := r.fenceForHeal(ctx); err != nil {
			return res, err
		}
		if res.Rows, err = r.publishGap(ctx, conn, "", st.SlotConfirmed, fence, st, &res.OnKafka); err != nil {
			return res, fmt.Errorf("healing slot %q (nothing was recorded; the next start heals again): %w", slot, err)
		}
		note := fmt.Sprintf("healed %s (%s): %d outbox rows after fence %s republished (%d more on Kafka already); streaming from the slot at %s", time.Now().UTC().Format(time.RFC3339), plan.what, res.Rows, orNone(res.FenceLSN), res.OnKafka, st.SlotConfirmed)
		if st, err = slotrecord.Healed(ctx, conn, r.rec.table, slot, st.SlotConfirmed, false, note); err != nil {
			return res, err
		}
		res.SlotLSN = st.SlotConfirmed.String()
		r.rec.use(st)
		r.heal = nil
		r.log.Info("slot healed", "slot", slot, "rows", res.Rows, "on_kafka", res.OnKafka, "slot_lsn", res.SlotLSN)
		return res, nil
	}
	if st.SlotExists {
		if !st.SlotLost {
			return res, fmt.Errorf("healing slot %q: it exists again (created meanwhile by someone else): start again", slot)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			return res, fmt.Errorf("dropping lost slot %q to heal it: %w", slot, err)
		}
		r.log.Info("healing the slot: dropped the lost slot", "slot", slot)
	}
	if err := r.fenceForHeal(ctx); err != nil {
		return res, err
	}
	tmp, err := tempSlotName()
	if err != nil {
		return res, err
	}
	exp, err := snapshot.Export(ctx, r.cfg.Postgres.DSN, tmp)
	if err != nil {
		return res, err
	}
	defer func() { _ = exp.Close(context.WithoutCancel(ctx)) }()
	r.log.Info("healing the slot: republishing the outbox rows after the record's covered fence, read in a new slot's exported snapshot",
		"slot", slot, "what", plan.what, "record_lsn", res.RecordLSN, "fence_lsn", res.FenceLSN, "consistent_lsn", exp.LSN.String())
	if res.Rows, err = r.publishGap(ctx, conn, exp.Name, exp.LSN, fence, st, &res.OnKafka); err != nil {
		return res, fmt.Errorf("healing slot %q (no slot was created; the next start heals again): %w", slot, err)
	}
	// The record first (write-ahead): killed before the slot exists, the
	// next start finds it missing and heals again.
	note := fmt.Sprintf("healed %s (%s): %d outbox rows after fence %s republished (%d more on Kafka already); slot created at %s", time.Now().UTC().Format(time.RFC3339), plan.what, res.Rows, orNone(res.FenceLSN), res.OnKafka, exp.LSN)
	if st, err = slotrecord.Healed(ctx, conn, r.rec.table, slot, exp.LSN, true, note); err != nil {
		return res, err
	}
	if err := exp.Persist(ctx, conn, slot); err != nil {
		return res, err
	}
	// pg_copy_logical_replication_slot never copies failover: switch it
	// on (postgres.slot_failover), as the initial snapshot does. Failing
	// that, the next start does.
	if r.fslot.on {
		if err := postgres.EnableFailover(ctx, conn, slot); err != nil {
			r.log.Warn("could not switch failover on for the healed slot; the next start tries again", "slot", slot, "err", err)
		}
	}
	if err := exp.Close(ctx); err != nil {
		r.log.Warn("closing the snapshot's replication connection", "err", err)
	}
	r.tracker.SetStart(exp.LSN)
	r.rec.use(st)
	r.heal = nil
	res.SlotLSN, res.Created = exp.LSN.String(), true
	r.log.Info("slot healed: created it at its consistent point; streaming from there", "slot", slot, "rows", res.Rows, "on_kafka", res.OnKafka, "lsn", res.SlotLSN)
	return res, nil
}

// fenceForHeal, with exactly-once delivery, fences older producers of
// the transactional id once the heal is sure to publish (its lock held,
// the slot as it expects): the InitProducerID ends (commits or aborts)
// whatever an earlier process of the id left open, so the
// deduplication's read_committed read sees every record of this relay
// that Kafka will ever show.
func (r *Relay) fenceForHeal(ctx context.Context) error {
	if err := r.delivery.fenceOlder(ctx); err != nil {
		return fmt.Errorf("healing slot %q (nothing was recorded; the next start heals again): %w", r.cfg.Postgres.Slot, err)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none (every row)"
	}
	return s
}

// publishGap publishes the rows of snapshot name (a snapshot of its own
// when empty) that do not precede fence (every row when fence is nil, or
// is not of this server's history), oldest transaction first, as one
// tracked transaction ending at lsn, and returns once Kafka acknowledged
// them. Oldest first is commit order with track_commit_timestamp on
// (pg_xact_commit_timestamp), and otherwise xid order (the age of the
// row's xmin), which is commit order for the rows of one key unless two
// of its transactions overlapped (the later xid committing first); within
// a transaction, statement order (cmin), then heap order (ctid). With
// several tables the order is across them (snapshot.Reader.MergeOrdered),
// so a key's rows in two tables keep their commit order, but for one
// statement writing both (see the order's comment).
//
// With exactly-once delivery the rows go through the transaction loop:
// Kafka transactions of the transactional producer (fenced by the
// caller), each with a checkpoint at lsn of the server st reads (no last
// transaction: the slot streams what commits after lsn, so the checkpoint
// skips nothing it sends), and it returns once the last of them
// committed. A read_committed consumer sees the gap's rows only then.
func (r *Relay) publishGap(ctx context.Context, conn *pgx.Conn, name string, lsn pglogrepl.LSN, fence *txfence.Fence, st slotrecord.State, onKafka *int64) (int64, error) {
	r.delivery.restart(lsn, replication.Session{SystemID: st.System, Timeline: int32(st.Timeline), SlotConfirmed: lsn}, eoscheckpoint.Last{})
	n, err := r.publishRead(ctx, conn, name, lsn, func(rd *snapshot.Reader) (readPlan, error) {
		var s string
		if err := rd.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&s); err != nil {
			return readPlan{}, fmt.Errorf("reading the snapshot's xmax: %w", err)
		}
		xmax, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return readPlan{}, fmt.Errorf("parsing snapshot xmax %q: %w", s, err)
		}
		x := txfence.XminExpr
		// Older transactions first: the distance from the row's xmin back
		// from the snapshot's xmax (frozen xids are the oldest).
		order := []snapshot.OrderKey{{Expr: fmt.Sprintf("CASE WHEN %s < 3 THEN 4294967296 ELSE (%d - %s + 4294967296) %% 4294967296 END", x, xmax%(1<<32), x), Desc: true}}
		// With track_commit_timestamp, commit order itself: xid order
		// differs from it where transactions of one key overlapped. In
		// microseconds; no timestamp (a frozen xid, one committed before
		// the setting was on) first.
		var ts string
		if err := rd.QueryRow(ctx, `SELECT current_setting('track_commit_timestamp')`).Scan(&ts); err != nil {
			return readPlan{}, fmt.Errorf("reading track_commit_timestamp: %w", err)
		}
		if ts == "on" {
			order = append([]snapshot.OrderKey{{Expr: "coalesce((extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint, -1)"}}, order...)
		}
		// Within a transaction, statement order (cmin, the inserting
		// command: the command counter is the transaction's, so it orders
		// the statements into every table), then the row's place in the
		// heap (one statement's rows; MergeOrdered's ctid). One statement
		// writing two tables is the limit: a WITH ... INSERT's rows share
		// cmin (table order), and a trigger's rows carry its statements'
		// later cmin (after the firing statement's rows).
		order = append(order, snapshot.OrderKey{Expr: "cmin::text::bigint"})
		rp := readPlan{order: order, skipped: onKafka}
		if fence != nil {
			x32, window, err := txfence.Window(ctx, rd, *fence)
			if err != nil {
				r.log.Warn("the record's fence is not usable on this server: republishing every row", "err", err)
			} else {
				rp.where = "NOT " + txfence.PrecedesSQL(x, strconv.FormatInt(x32, 10), strconv.FormatInt(window, 10))
			}
		}
		rp.skip = r.onKafka(ctx, rd, rp.where)
		return rp, nil
	})
	if err == nil {
		// With exactly-once delivery the last checkpoint too (one of its
		// own when the gap's last Kafka transaction ended inside it),
		// before anything is recorded.
		err = r.delivery.drained(ctx)
	}
	return n, err
}

// ErrNothingToHeal: walrelay slot heal found the slot walrelay's own (or
// no record of it): there is nothing to heal.
var ErrNothingToHeal = errors.New("nothing to heal")

// Heal is walrelay slot heal: it checks the slot against walrelay's
// record as walrelay run does at start and, when the slot is missing,
// lost or past the record, heals it (see the file's comment) and
// returns; walrelay run then streams from the healed slot. Call it
// instead of Run, once, with outbox.on_slot_loss set to heal. A slot
// walrelay has no record of is not healed (ErrNothingToHeal): nothing
// says which rows it delivered; nor is one that needs nothing.
func (r *Relay) Heal(ctx context.Context) (HealResult, error) {
	defer r.closePublisher()
	res := HealResult{Slot: r.cfg.Postgres.Slot}
	if !r.healOn() {
		return res, errors.New("walrelay slot heal runs with outbox.on_slot_loss=heal")
	}
	conn, err := pgsession.Connect(ctx, r.cfg.Postgres.DSN)
	if err != nil {
		return res, postgres.ExplainConnectError(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Exactly-once: the transactional producer, as walrelay run builds
	// it (its id is derived from the server).
	if err := r.delivery.connect(ctx, conn); err != nil {
		return res, err
	}
	// A record left in another listed table's schema would read as none
	// here: say where it is instead of "no record".
	if err := r.locateRecord(ctx, conn); err != nil {
		return res, err
	}
	if _, err := r.rec.table.Ensure(ctx, conn); err != nil {
		return res, err
	}
	st, err := slotrecord.Read(ctx, conn, r.rec.table, r.cfg.Postgres.Slot)
	if err != nil {
		return res, err
	}
	if st.Record == nil {
		return res, fmt.Errorf("%w: walrelay has no record of slot %q, so nothing says which rows it delivered (walrelay run creates and records it; walrelay snapshot republishes every row)", ErrNothingToHeal, r.cfg.Postgres.Slot)
	}
	if err := r.checkPublications(ctx, conn); err != nil {
		return res, err
	}
	confirmed, err := r.ensureSlot(ctx, conn)
	if err != nil {
		return res, err
	}
	if r.heal == nil {
		return res, fmt.Errorf("%w: slot %q is at %s, which walrelay's record proves its own", ErrNothingToHeal, r.cfg.Postgres.Slot, confirmed)
	}
	r.tracker.SetStart(confirmed)
	if err := r.pub.CheckAccess(ctx, 10*time.Second); err != nil {
		return res, err
	}
	dlqCtx, stopDLQ := context.WithCancel(context.WithoutCancel(ctx))
	dlqDone := make(chan struct{})
	go func() {
		defer close(dlqDone)
		r.runDeadLetters(dlqCtx)
	}()
	defer func() { stopDLQ(); <-dlqDone }()
	if err := r.delivery.prepareKafka(ctx); err != nil {
		return res, err
	}
	txnCtx, stopTxns := context.WithCancel(context.WithoutCancel(ctx))
	txnDone := make(chan struct{})
	go func() {
		defer close(txnDone)
		r.delivery.run(txnCtx)
	}()
	defer func() { stopTxns(); <-txnDone }()
	return r.healSlot(ctx)
}
