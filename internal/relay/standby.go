// Decoding from a standby (Postgres 16+): the slot on a hot standby
// (postgres.dsn), the outbox objects, heartbeats and walrelay's slot
// record on its primary (postgres.primary_dsn).

package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/postgres"
)

// Errors of decoding from a standby, returned wrapped by Run's startup.
var (
	// ErrStandbyTooOld: postgres.dsn is a hot standby older than
	// Postgres 16, which cannot decode.
	ErrStandbyTooOld = postgres.ErrStandbyTooOld
	// ErrStandbyNeedsPrimary: postgres.dsn is a hot standby and
	// postgres.primary_dsn is empty; walrelay could not write its slot
	// record or heartbeats.
	ErrStandbyNeedsPrimary = errors.New("postgres.dsn is a hot standby and postgres.primary_dsn is not set")
	// ErrNotStandby: postgres.primary_dsn is set but postgres.dsn is not
	// in recovery (a primary, or a standby since promoted).
	ErrNotStandby = errors.New("postgres.primary_dsn is set but postgres.dsn is not a hot standby")
)

// standbyState is what the startup found out about decoding from a
// standby, and the slot creation Ready reports.
type standbyState struct {
	// on: postgres.dsn is a hot standby (with postgres.primary_dsn).
	on bool
	// creatingSince is the unix nanoseconds at which the startup began
	// creating the slot on the standby; 0 when it is not creating one.
	creatingSince atomic.Int64
}

// checkStandby reads whether postgres.dsn (conn) is a hot standby, and
// refuses what cannot work: a standby older than 16, a standby without
// postgres.primary_dsn (walrelay would fail to write its slot record and
// heartbeats there), and postgres.primary_dsn with a server that is not a
// standby (promoted: the record on the old primary would be of another
// history).
func (r *Relay) checkStandby(ctx context.Context, conn *pgx.Conn) error {
	standby, err := postgres.StandbyDecoding(ctx, conn)
	if err != nil {
		return err
	}
	primary := r.cfg.Postgres.PrimaryDSN != ""
	switch {
	case standby && !primary:
		return fmt.Errorf("%w: walrelay writes its slot record and heartbeats on the primary; set postgres.primary_dsn to the primary's connection string (docs/deploy.md, \"Decoding from a standby\"), or point postgres.dsn at the primary", ErrStandbyNeedsPrimary)
	case !standby && primary:
		return fmt.Errorf("%w (a primary, or a standby since promoted): empty postgres.primary_dsn to relay from postgres.dsn as a primary, or point postgres.dsn at the hot standby", ErrNotStandby)
	}
	r.standby.on = standby
	if standby {
		r.log.Info("decoding from a hot standby: the slot is on postgres.dsn; heartbeats and the slot record are written on postgres.primary_dsn", "primary", config.Redact(r.cfg.Postgres.PrimaryDSN))
	}
	return nil
}

// createSlot creates the slot on conn (creatingSlot).
func (r *Relay) createSlot(ctx context.Context, conn *pgx.Conn, name string) (s postgres.Slot, err error) {
	err = r.creatingSlot(ctx, name, func() (err error) {
		s, err = postgres.CreateSlot(ctx, conn, name, r.fslot.on)
		return err
	})
	return s, err
}

// creatingSlot runs create, which creates slot name. On a standby,
// Postgres makes a new slot consistent only at a running-transactions
// record (xl_running_xacts) from the primary, which an idle primary may
// not write for a long time: while create runs, walrelay asks the primary
// for one every second (pg_log_standby_snapshot), and Ready says what it
// waits for.
func (r *Relay) creatingSlot(ctx context.Context, name string, create func() error) error {
	if !r.standby.on {
		return create()
	}
	r.standby.creatingSince.Store(time.Now().UnixNano())
	defer r.standby.creatingSince.Store(0)
	nctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		postgres.LogStandbySnapshots(nctx, r.cfg.Postgres.PrimaryDSN, time.Second, r.log)
	})
	defer wg.Wait()
	defer stop()
	r.log.Info("creating a replication slot on the standby: Postgres waits for a running-transactions record from the primary; asking the primary for one (pg_log_standby_snapshot)", "slot", name)
	return create()
}

// standbyWait is Ready's reason while the startup creates the slot on a
// standby, or "".
func (r *Relay) standbyWait() string {
	since := r.standby.creatingSince.Load()
	if since == 0 {
		return ""
	}
	return fmt.Sprintf("not streaming: creating slot %q on the standby for %s: Postgres is waiting for a running-transactions record (xl_running_xacts) from the primary; walrelay asks the primary for one every second with pg_log_standby_snapshot() (a role that may not run it: grant EXECUTE on it, or write on the primary)",
		r.cfg.Postgres.Slot, time.Since(time.Unix(0, since)).Round(time.Second))
}

// slotConn is the recorder's connection to the standby that holds the slot
// (slotrecord.Table.Slots), opened at the first read and again after a
// failure. Used only under the recorder's io lock or before its goroutine
// starts.
type slotConn struct {
	dsn  string
	conn *pgx.Conn
}

func (s *slotConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if s.conn == nil || s.conn.IsClosed() {
		conn, err := pgsession.Connect(ctx, s.dsn)
		if err != nil {
			return errRow{fmt.Errorf("connecting to the standby to read the slot: %w", postgres.ExplainConnectError(err))}
		}
		s.conn = conn
	}
	return s.conn.QueryRow(ctx, sql, args...)
}

func (s *slotConn) close() {
	if s != nil && s.conn != nil {
		_ = s.conn.Close(context.Background())
		s.conn = nil
	}
}

// errRow is a pgx.Row whose Scan returns err.
type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }
