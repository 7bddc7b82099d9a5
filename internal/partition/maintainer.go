package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// Maintainer keeps the partitions of the partitioned outbox tables
// created ahead while `walrelay run` runs: every outbox.prune_interval it
// reads how each table of postgres.table is stored and, for each one
// partitioned by range of outbox.time_column, creates the partition
// holding now and outbox.partitions_ahead more (EnsureAhead), each
// statement under outbox.prune_statement_timeout and LockTimeout. A plain
// table, or one partitioned otherwise, is left alone (said once per table
// in the log, at debug for a plain table); the tables may mix both. A
// failed round is logged and tried again at the next, and one table's
// failure does not stop the others': the Maintainer never stops the
// relay.
type Maintainer struct {
	dsn     string
	tables  []*maintained
	column  string
	ahead   int
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
}

// maintained is one outbox table of a Maintainer.
type maintained struct {
	table   string // schema.table, as postgres.table lists it
	scheme  Scheme
	invalid error  // NewScheme's error: reported only for a partitioned table
	said    string // the last "nothing to do" reason logged, to log it once
}

// tableError is one table's failure in a Maintainer's round: "schema.table:
// the error".
type tableError struct {
	Table string // schema.table
	Err   error
}

func (e *tableError) Error() string { return e.Table + ": " + e.Err.Error() }

func (e *tableError) Unwrap() error { return e.Err }

// NewMaintainer returns the Maintainer for cfg's outbox tables (every
// table of postgres.table, postgres.dsn and the outbox section), logging
// to log. A scheme NewScheme refuses (partition names over 63 bytes) is
// reported by each round that finds that table partitioned, not here: a
// plain outbox with a long name is no error.
func NewMaintainer(cfg config.Config, log *slog.Logger) *Maintainer {
	m := &Maintainer{
		dsn: cfg.Postgres.Primary(), column: cfg.Outbox.TimeColumn,
		ahead: cfg.Outbox.PartitionsAhead,
		every: cfg.Outbox.PruneInterval, timeout: cfg.Outbox.PruneStatementTimeout,
		log: log.With("component", "partitions"), now: time.Now,
	}
	for _, t := range cfg.Postgres.Tables() {
		s, err := NewScheme(t.String(), cfg.Outbox.TimeColumn, cfg.Outbox.PartitionInterval)
		m.tables = append(m.tables, &maintained{table: t.String(), scheme: s, invalid: err})
	}
	return m
}

// Run runs a round at once and then every outbox.prune_interval until ctx
// is done, and returns nil then. Run's goroutine is the only one it uses.
func (m *Maintainer) Run(ctx context.Context) error {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		_, errs := m.round(ctx)
		for _, err := range errs {
			if ctx.Err() != nil {
				break
			}
			table := m.names()
			var te *tableError
			if errors.As(err, &te) {
				table, err = te.Table, te.Err
			}
			m.log.Warn("could not create the outbox's partitions ahead; trying again at the next round",
				"table", table, "next_in", m.every.String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// names is the tables' names joined with commas.
func (m *Maintainer) names() string {
	names := make([]string, len(m.tables))
	for i, t := range m.tables {
		names[i] = t.table
	}
	return strings.Join(names, ",")
}

// Round is one round of Run, for `walrelay outbox prune`: it connects,
// checks each outbox table's layout and creates the partitions that are
// missing, returning those it created in every table (none for a plain
// outbox). The tables' failures are joined, each prefixed with its
// table's name, and the other tables are done all the same.
func (m *Maintainer) Round(ctx context.Context) ([]Partition, error) {
	created, errs := m.round(ctx)
	return created, errors.Join(errs...)
}

func (m *Maintainer) round(ctx context.Context) ([]Partition, []error) {
	pc, err := pgx.ParseConfig(m.dsn)
	if err != nil {
		return nil, []error{fmt.Errorf("parsing postgres.dsn: %w", err)}
	}
	pc.RuntimeParams["statement_timeout"] = strconv.FormatInt(m.timeout.Milliseconds(), 10)
	pc.RuntimeParams["lock_timeout"] = strconv.FormatInt(min(LockTimeout, m.timeout).Milliseconds(), 10)
	pc.RuntimeParams["application_name"] = "walrelay partitions"
	cctx, cancel := context.WithTimeout(ctx, m.timeout+10*time.Second)
	defer cancel()
	conn, err := pgsession.ConnectConfig(cctx, pc)
	if err != nil {
		return nil, []error{fmt.Errorf("connecting to postgres: %w", err)}
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var all []Partition
	var errs []error
	for _, t := range m.tables {
		if ctx.Err() != nil {
			return all, append(errs, ctx.Err())
		}
		created, err := m.ensure(ctx, conn, t)
		all = append(all, created...)
		if err != nil {
			errs = append(errs, &tableError{Table: t.table, Err: err})
		}
	}
	return all, errs
}

// ensure creates the missing partitions of table t when it is partitioned
// by range of the time column, each table with its own deadline.
func (m *Maintainer) ensure(ctx context.Context, conn *pgx.Conn, t *maintained) ([]Partition, error) {
	cctx, cancel := context.WithTimeout(ctx, m.timeout+10*time.Second)
	defer cancel()
	layout, err := Inspect(cctx, conn, t.table)
	switch {
	case errors.Is(err, ErrNoTable):
		m.once(t, slog.LevelInfo, "the outbox table does not exist; no partitions to create")
		return nil, nil
	case err != nil:
		return nil, err
	case !layout.Partitioned:
		m.once(t, slog.LevelDebug, "the outbox is a plain table; no partitions to create")
		return nil, nil
	case !layout.RangeOn(m.column):
		m.once(t, slog.LevelInfo, fmt.Sprintf("the outbox is %s, not by range of outbox.time_column %q; walrelay does not create its partitions", layout, m.column))
		return nil, nil
	case t.invalid != nil:
		return nil, t.invalid
	}
	t.said = ""
	created, err := t.scheme.EnsureAhead(cctx, conn, m.ahead, m.now())
	for _, p := range created {
		m.log.Info("created outbox partition", "table", t.table, "partition", p.Schema+"."+p.Name, "from", p.From, "to", p.To)
	}
	return created, err
}

// once logs a reason for doing nothing with table t, once per reason: at
// debug for a plain table (most outboxes), at info otherwise.
func (m *Maintainer) once(t *maintained, level slog.Level, reason string) {
	if t.said != reason {
		t.said = reason
		m.log.Log(context.Background(), level, reason, "table", t.table)
	}
}
