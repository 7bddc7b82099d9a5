package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/pgsession"
)

// LockTimeout is how long the Maintainer's session waits for the root's
// lock before giving up until its next round. CREATE TABLE ... PARTITION
// OF takes an ACCESS EXCLUSIVE lock on the root: while it waits (behind a
// long transaction that touched the outbox), every INSERT into the outbox
// waits behind it, so it must not wait long. Partitions are created
// outbox.partitions_ahead intervals before they are needed, so a round
// that gives up costs nothing.
const LockTimeout = time.Second

// Maintainer keeps the partitions of a partitioned outbox created ahead
// while `walrelay run` runs: every outbox.prune_interval it reads how the
// outbox is stored and, when it is partitioned by range of
// outbox.time_column, creates the partition holding now and
// outbox.partitions_ahead more (EnsureAhead), each statement under
// outbox.prune_statement_timeout and LockTimeout. A plain table, or one
// partitioned otherwise, is left alone (said once in the log, at debug
// for a plain table). A failed round is logged and tried again at the
// next: the Maintainer never stops the relay.
type Maintainer struct {
	dsn     string
	table   string // postgres.table
	column  string
	scheme  Scheme
	invalid error // NewScheme's error: reported only for a partitioned outbox
	ahead   int
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time

	said string // the last "nothing to do" reason logged, to log it once
}

// NewMaintainer returns the Maintainer for cfg's outbox (postgres.table,
// postgres.dsn and the outbox section), logging to log. A scheme
// NewScheme refuses (partition names over 63 bytes) is reported by each
// round that finds the outbox partitioned, not here: a plain outbox with a
// long name is no error.
func NewMaintainer(cfg config.Config, log *slog.Logger) *Maintainer {
	s, err := NewScheme(cfg.Postgres.Tables()[0].String(), cfg.Outbox.TimeColumn, cfg.Outbox.PartitionInterval)
	return &Maintainer{
		dsn: cfg.Postgres.Primary(), table: cfg.Postgres.Tables()[0].String(), column: cfg.Outbox.TimeColumn,
		scheme: s, invalid: err, ahead: cfg.Outbox.PartitionsAhead,
		every: cfg.Outbox.PruneInterval, timeout: cfg.Outbox.PruneStatementTimeout,
		log: log.With("component", "partitions"), now: time.Now,
	}
}

// Run runs a round at once and then every outbox.prune_interval until ctx
// is done, and returns nil then. Run's goroutine is the only one it uses.
func (m *Maintainer) Run(ctx context.Context) error {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		if _, err := m.Round(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("could not create the outbox's partitions ahead; trying again at the next round",
				"table", m.table, "next_in", m.every.String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round is one round of Run, for `walrelay outbox prune`: it connects,
// checks the outbox's layout and creates the partitions that are missing,
// returning those it created (none for a plain outbox).
func (m *Maintainer) Round(ctx context.Context) ([]Partition, error) {
	pc, err := pgx.ParseConfig(m.dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing postgres.dsn: %w", err)
	}
	pc.RuntimeParams["statement_timeout"] = strconv.FormatInt(m.timeout.Milliseconds(), 10)
	pc.RuntimeParams["lock_timeout"] = strconv.FormatInt(min(LockTimeout, m.timeout).Milliseconds(), 10)
	pc.RuntimeParams["application_name"] = "walrelay partitions"
	cctx, cancel := context.WithTimeout(ctx, m.timeout+10*time.Second)
	defer cancel()
	conn, err := pgsession.ConnectConfig(cctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	layout, err := Inspect(cctx, conn, m.table)
	switch {
	case errors.Is(err, ErrNoTable):
		m.once(slog.LevelInfo, "the outbox table does not exist; no partitions to create")
		return nil, nil
	case err != nil:
		return nil, err
	case !layout.Partitioned:
		m.once(slog.LevelDebug, "the outbox is a plain table; no partitions to create")
		return nil, nil
	case !layout.RangeOn(m.column):
		m.once(slog.LevelInfo, fmt.Sprintf("the outbox is %s, not by range of outbox.time_column %q; walrelay does not create its partitions", layout, m.column))
		return nil, nil
	case m.invalid != nil:
		return nil, m.invalid
	}
	m.said = ""
	created, err := m.scheme.EnsureAhead(cctx, conn, m.ahead, m.now())
	for _, p := range created {
		m.log.Info("created outbox partition", "partition", p.Schema+"."+p.Name, "from", p.From, "to", p.To)
	}
	return created, err
}

// once logs a reason for doing nothing, once per reason: at debug for a
// plain table (most outboxes), at info otherwise.
func (m *Maintainer) once(level slog.Level, reason string) {
	if m.said != reason {
		m.said = reason
		m.log.Log(context.Background(), level, reason, "table", m.table)
	}
}
