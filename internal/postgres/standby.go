package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/slotrecord"
)

// This file holds decoding from a standby (Postgres 16+): the slot on a
// hot standby (postgres.dsn), the outbox objects, heartbeats and
// walrelay's slot record on its primary (postgres.primary_dsn). Its check
// items are in checkstandby.go.

// MinStandbyDecodingVersion is the oldest Postgres that decodes on a
// standby.
const MinStandbyDecodingVersion = 160000

// StandbyDecoding reports whether conn's server is a hot standby (in
// recovery), and refuses one that cannot decode: the error wraps
// ErrStandbyTooOld for a standby older than Postgres 16.
func StandbyDecoding(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var standby bool
	var num int
	var text string
	err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&standby, &num, &text)
	if err != nil {
		return false, QueryError("reading whether the server is a standby", "", err)
	}
	if standby && num < MinStandbyDecodingVersion {
		return true, fmt.Errorf("%w: postgres.dsn is a hot standby running PostgreSQL %s: point postgres.dsn at the primary (and leave postgres.primary_dsn empty), or upgrade to 16 or newer", ErrStandbyTooOld, text)
	}
	return standby, nil
}

// LogStandbySnapshots asks the primary at dsn for a running-transactions
// record (SELECT pg_log_standby_snapshot()) at once and then every
// interval until ctx is done: a slot being created on a standby becomes
// consistent only at such a record, which an idle primary writes rarely
// or never. A failure (a role that may not run it: it is superuser-only
// unless granted) is logged once.
func LogStandbySnapshots(ctx context.Context, dsn string, every time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	warned := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		err := func() error {
			if conn == nil || conn.IsClosed() {
				c, err := Connect(ctx, dsn)
				if err != nil {
					return err
				}
				conn = c
			}
			if _, err := conn.Exec(ctx, `SELECT pg_log_standby_snapshot()`); err != nil {
				return QueryError("asking the primary for a running-transactions record (pg_log_standby_snapshot)", "grant the role EXECUTE on pg_log_standby_snapshot() (GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO ...), or wait for the primary's next one", err)
			}
			return nil
		}()
		if err != nil && ctx.Err() == nil && !warned {
			log.Warn("cannot ask the primary for a running-transactions record; the slot's creation on the standby waits until the primary writes one", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WaitReplayed waits until the standby has replayed everything the
// primary had written when it was called (pg_current_wal_lsn on primary,
// pg_last_wal_replay_lsn on standby): what setup created on the primary
// (the publication) is then visible on the standby.
func WaitReplayed(ctx context.Context, primary, standby *pgx.Conn) error {
	var target string
	if err := primary.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&target); err != nil {
		return QueryError("reading the primary's WAL position", "", err)
	}
	want, err := pglogrepl.ParseLSN(target)
	if err != nil {
		return fmt.Errorf("parsing the primary's WAL position %q: %w", target, err)
	}
	for {
		var replayed *string
		if err := standby.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&replayed); err != nil {
			return QueryError("reading the standby's replay position", "", err)
		}
		if replayed != nil {
			if at, err := pglogrepl.ParseLSN(*replayed); err == nil && at >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			got := "none"
			if replayed != nil {
				got = *replayed
			}
			return fmt.Errorf("waiting for the standby to replay the primary's WAL up to %s (replayed %s): %w", target, got, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CreateRecordedSlotOnStandby is CreateRecordedSlot when decoding from a
// standby: the slot is created on standby (with nudge running meanwhile:
// see LogStandbySnapshots), its record kept on primary, where the record
// table is created when missing.
func CreateRecordedSlotOnStandby(ctx context.Context, primary, standby *pgx.Conn, records slotrecord.Table, name string, replace bool, nudge func(context.Context)) (Slot, slotrecord.State, error) {
	if err := ValidateSlotName(name); err != nil {
		return Slot{}, slotrecord.State{}, err
	}
	if _, err := StandbyDecoding(ctx, standby); err != nil {
		return Slot{}, slotrecord.State{}, err
	}
	replication, _, _, _, err := CanReplicate(ctx, standby)
	if err != nil {
		return Slot{}, slotrecord.State{}, QueryError("reading the role's attributes", "", err)
	}
	if !replication {
		return Slot{}, slotrecord.State{}, fmt.Errorf("%w: creating replication slot %q: %s", ErrPrivilege, name, PrivilegeFix(ctx, standby))
	}
	if _, err := records.Ensure(ctx, primary); err != nil {
		return Slot{}, slotrecord.State{}, err
	}
	records.Slots = standby
	st, err := slotrecord.Read(ctx, primary, records, name)
	if err != nil {
		return Slot{}, st, err
	}
	if err := recreating(st, name, replace); err != nil {
		return Slot{}, st, err
	}
	s, err := func() (Slot, error) {
		if nudge != nil {
			nctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				nudge(nctx)
			}()
			defer func() {
				stop()
				<-done
			}()
		}
		return CreateSlot(ctx, standby, name, false) // Postgres makes failover slots only on a primary
	}()
	if err != nil {
		return Slot{}, st, err
	}
	return recordNewSlot(ctx, primary, standby, records, st, s, " on a standby")
}
