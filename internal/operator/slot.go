package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/postgres"
)

// This file holds the slot actions only the subcommands take: dropping a
// slot (`walrelay slot drop`), and the check peek and advance make first.

// usableSlot returns the slot if it exists, is pgoutput in this database
// and no process holds it; otherwise an error wrapping
// postgres.ErrSlotNotFound, ErrSlotMismatch or ErrSlotActive. inUseHint
// is the fix in the in-use message.
func usableSlot(ctx context.Context, conn *pgx.Conn, name, inUseHint string) (postgres.Slot, error) {
	s, err := postgres.InspectSlot(ctx, conn, name)
	if err != nil {
		return postgres.Slot{}, err
	}
	db, err := postgres.CurrentDatabase(ctx, conn)
	if err != nil {
		return postgres.Slot{}, err
	}
	if p := s.Problem(db); p != "" {
		return postgres.Slot{}, fmt.Errorf("%w: %s", postgres.ErrSlotMismatch, p)
	}
	if s.Active {
		return postgres.Slot{}, postgres.ActiveError(s, inUseHint)
	}
	return s, nil
}

// DropSlot drops a slot of this database (or a physical one). A slot in
// use is refused unless force, which terminates its holder first.
func DropSlot(ctx context.Context, conn *pgx.Conn, name string, force bool) (postgres.Slot, error) {
	s, err := postgres.InspectSlot(ctx, conn, name)
	if err != nil {
		return postgres.Slot{}, err
	}
	db, err := postgres.CurrentDatabase(ctx, conn)
	if err != nil {
		return postgres.Slot{}, err
	}
	if s.SlotType == "logical" && s.Database != db {
		return postgres.Slot{}, fmt.Errorf("%w: slot %q belongs to database %q, not %q: connect to %q in postgres.dsn to drop it", postgres.ErrSlotMismatch, name, s.Database, db, s.Database)
	}
	if s.Active {
		if !force {
			return postgres.Slot{}, postgres.ActiveError(s, "stop the relay first, or pass --force to terminate it")
		}
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, s.ActivePID); err != nil {
			return postgres.Slot{}, postgres.QueryError(fmt.Sprintf("terminating pid %d holding slot %q", s.ActivePID, name), "a superuser or a member of pg_signal_backend can terminate it", err)
		}
		if err := waitInactive(ctx, conn, name, 10*time.Second); err != nil {
			return postgres.Slot{}, err
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, name); err != nil {
		return postgres.Slot{}, postgres.QueryError(fmt.Sprintf("dropping replication slot %q", name), postgres.PrivilegeFix(ctx, conn), err)
	}
	return s, nil
}

// waitInactive waits for a terminated walsender to release its slot.
func waitInactive(ctx context.Context, conn *pgx.Conn, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var active bool
		if err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&active); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return postgres.QueryError(fmt.Sprintf("reading replication slot %q", name), "", err)
		}
		if !active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: slot %q is still in use %s after terminating its holder: a walrelay with a restart policy may have taken it again; stop it and retry", postgres.ErrSlotActive, name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
