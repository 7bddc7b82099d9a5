package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// slotPoll is how often WaitConfirmed reads the slot.
const slotPoll = 25 * time.Millisecond

// ParseLSN parses an LSN in Postgres's text form (16/B374D848) and fails
// the test if it is malformed.
func ParseLSN(tb testing.TB, s string) pglogrepl.LSN {
	tb.Helper()
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		tb.Fatalf("testenv: parsing LSN %q: %v", s, err)
	}
	return lsn
}

// SlotLSNs returns the replication slot's confirmed_flush_lsn and the
// server's current WAL LSN (pg_current_wal_lsn()), read in one query. It
// fails the test if the slot does not exist, has no confirmed_flush_lsn
// (not a logical slot) or cannot be read.
func SlotLSNs(tb testing.TB, dsn, slot string) (confirmed, current pglogrepl.LSN) {
	tb.Helper()
	s, err := readSlot(tb.Context(), dsn, slot)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
		return 0, 0
	}
	if s.confirmed == nil {
		tb.Fatalf("testenv: slot %s has no confirmed_flush_lsn", slot)
		return 0, s.current
	}
	return *s.confirmed, s.current
}

// WaitConfirmed waits until the slot's confirmed_flush_lsn reaches target,
// failing the test after timeout with the last position seen. Errors
// reading the slot (a server restarting) are retried until the timeout and
// the last one is reported; a slot that does not exist fails the test at
// once.
func WaitConfirmed(tb testing.TB, dsn, slot string, target pglogrepl.LSN, timeout time.Duration) {
	tb.Helper()
	waitConfirmed(tb, dsn, slot, target, timeout, false)
}

// nudgeEvery is how often WaitCaughtUp writes a WAL record of its own
// while the slot has not caught up.
const nudgeEvery = 250 * time.Millisecond

func waitConfirmed(tb testing.TB, dsn, slot string, target pglogrepl.LSN, timeout time.Duration, nudge bool) {
	tb.Helper()
	var nudged time.Time
	deadline := time.Now().Add(timeout)
	last := "(none)" // the last confirmed_flush_lsn read
	for {
		s, err := readSlot(tb.Context(), dsn, slot)
		if errors.Is(err, pgx.ErrNoRows) {
			tb.Fatalf("testenv: waiting for slot %s to confirm %s: %v", slot, target, err)
			return
		}
		if err == nil && s.confirmed != nil {
			if *s.confirmed >= target {
				return
			}
			last = s.confirmed.String()
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: slot %s: confirmed_flush_lsn %s did not reach %s within %s (last error: %v)", slot, last, target, timeout, err)
			return
		}
		if nudge && time.Since(nudged) >= nudgeEvery {
			// An empty transaction with an xid: a commit record after the
			// target, which the relay's next keepalive covers.
			nudged = time.Now()
			if c, err := pgx.Connect(tb.Context(), dsn); err == nil {
				_, _ = c.Exec(tb.Context(), `SELECT txid_current()`)
				_ = c.Close(context.WithoutCancel(tb.Context()))
			}
		}
		time.Sleep(slotPoll)
	}
}

// WaitCaughtUp waits until the slot's confirmed_flush_lsn reaches the
// server's WAL position as it is now (read once, at the call), as
// WaitConfirmed does. While it has not, it writes a WAL record of its own
// every 250ms (an empty transaction with an xid): on an idle database the
// last WAL may be walrelay's own slot record, which a relay never confirms
// until some later WAL brings a keepalive past it (docs/DESIGN.md,
// "Retention", the slot record). It returns how long it waited, which the
// fault suite reports as a recovery time.
func WaitCaughtUp(tb testing.TB, dsn, slot string, timeout time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	target := ParseLSN(tb, QueryValue[string](tb, dsn, `SELECT pg_current_wal_lsn()::text`))
	waitConfirmed(tb, dsn, slot, target, timeout, true)
	return time.Since(start)
}

// slotState is what readSlot reads: confirmed is nil while the slot has no
// confirmed_flush_lsn.
type slotState struct {
	confirmed *pglogrepl.LSN
	current   pglogrepl.LSN
}

// readSlot reads the slot's confirmed_flush_lsn and the server's current
// WAL LSN on a short-lived connection. A missing slot is an error wrapping
// pgx.ErrNoRows.
func readSlot(ctx context.Context, dsn, slot string) (slotState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return slotState{}, fmt.Errorf("connecting to read slot %s: %w", slot, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var confirmed *string
	var current string
	err = conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, pg_current_wal_lsn()::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed, &current)
	if errors.Is(err, pgx.ErrNoRows) {
		return slotState{}, fmt.Errorf("slot %s does not exist: %w", slot, err)
	}
	if err != nil {
		return slotState{}, fmt.Errorf("reading slot %s: %w", slot, err)
	}
	var s slotState
	if s.current, err = pglogrepl.ParseLSN(current); err != nil {
		return slotState{}, fmt.Errorf("parsing pg_current_wal_lsn %q: %w", current, err)
	}
	if confirmed != nil {
		lsn, err := pglogrepl.ParseLSN(*confirmed)
		if err != nil {
			return slotState{}, fmt.Errorf("parsing slot %s's confirmed_flush_lsn %q: %w", slot, *confirmed, err)
		}
		s.confirmed = &lsn
	}
	return s, nil
}

// WaitSlotFree waits, up to timeout, until no process holds the slot
// (pg_replication_slots.active_pid is null): a walsender outlives the
// client that stopped streaming by a moment, and moving or dropping the
// slot meanwhile fails with "is active for PID". It fails the test when
// the slot is still held then.
func WaitSlotFree(tb testing.TB, dsn, slot string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		held := QueryValue[bool](tb, dsn, `SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL)`, slot)
		if !held {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: slot %s still held by a process after %s", slot, timeout)
		}
		time.Sleep(slotPoll)
	}
}
