// Package setup creates what walrelay needs in Postgres: the outbox tables
// (sql/001_outbox_table.sql, or with Names.Partitions the partitioned
// sql/outbox_partitioned.sql and its partitions from now on, by
// internal/partition's scheme), the publication holding every one of them
// (INSERTs only, through the partition root; a table listed later is added
// to an existing publication with ALTER PUBLICATION ... ADD TABLE, once
// the transactions writing it have ended: LOCK TABLE ... IN SHARE MODE in
// the ALTER's transaction, under Names.LockTimeout) and the
// logical replication slot (unless
// Names.LeaveSlot: snapshot.mode=initial), and walrelay's record of its
// slots (sql/005_slot_positions.sql, internal/slotrecord, in the first
// table's schema), where it records
// the slot it creates (as a failover slot with Names.Failover). It
// refuses to create a slot walrelay confirmed through before (a record of
// it exists): rows after the record may be unpublished (walrelay slot
// create --replace says so and does); and it refuses, before creating
// anything, a record of the slot left in another listed table's schema
// (slotrecord.Locate: the list was reordered). It is idempotent:
// each object that already exists is reported and left alone.
//
// In: a connection and the names from config. Out: one Step per object,
// saying whether it was created or already existed.
//
// Identifiers are quoted with pgx's Identifier.Sanitize; values are passed
// as parameters. It does not create roles or grant privileges (see
// sql/004_role.sql): that is a DBA's decision.
package setup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/slotrecord"
	sqlfiles "github.com/walrelay/walrelay/sql"
)

// Step is the outcome for one object.
type Step struct {
	// Object is "table", "partitions", "publication", "records", "slot",
	// or "warning" (Name says what about, Note what to do).
	Object string
	Name   string
	// Created is false when the object already existed, or was left
	// (Note); true also for a change to an existing one (Note says what:
	// a table added to the publication).
	Created bool
	// Note, when set, replaces "created" or "already exists": an object
	// setup deliberately did not create, a change, or a warning.
	Note string
}

func (s Step) String() string {
	state := "already exists"
	if s.Created {
		state = "created"
	}
	if s.Note != "" {
		state = s.Note
	}
	return fmt.Sprintf("%-11s %-30s %s", s.Object, s.Name, state)
}

// Names are the objects to create.
type Names struct {
	// Tables are the outbox tables (postgres.table), in the order listed:
	// the first one's schema holds walrelay's record of its slots. Empty
	// means the one table Schema.Table.
	Tables []config.TableName
	// Schema and Table name the one outbox table when Tables is empty.
	Schema, Table string
	Publication   string
	Slot          string
	// Partitions, when set, makes a new outbox table partitioned
	// (outbox.partitioned) and creates its partitions ahead. The
	// partitions of an existing table partitioned by range of
	// Partitions.Column are created ahead too.
	Partitions *Partitions
	// Failover makes the slot a failover slot (postgres.slot_failover,
	// PostgreSQL 17+; the caller decides with postgres.SlotFailover): a slot
	// it creates is created with failover, and an existing slot without
	// it is switched on (ALTER_REPLICATION_SLOT), unless a process holds
	// it (the step says so; walrelay run switches it on at its next
	// start).
	Failover bool
	// LeaveSlot leaves a missing slot for walrelay run to create
	// (snapshot.mode=initial: run creates it at the end of the initial
	// snapshot; a slot created here would mean no snapshot). An existing
	// slot is still checked.
	LeaveSlot bool
	// TimeColumn is outbox.time_column: the warning of the rows a table
	// added to the publication held before gives the window of this column
	// they span, for walrelay verify --republish. Empty: Partitions.Column,
	// or no window.
	TimeColumn string
	// LockTimeout bounds the wait, when a table is added to an existing
	// publication, for the transactions writing it to end (lock_timeout of
	// its LOCK TABLE ... IN SHARE MODE); writers of that table wait behind
	// it meanwhile. 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// Standby, when set, creates the slot on a hot standby of conn's
	// server (decoding from a standby, Postgres 16+, postgres.primary_dsn):
	// everything else, the slot's record included, on conn (the primary).
	Standby *Standby
}

// Standby is the hot standby that holds the slot.
type Standby struct {
	// Conn is a connection to the standby.
	Conn *pgx.Conn
	// Nudge, when set, runs on its own goroutine while the slot is
	// created, until its ctx is done: it asks the primary for
	// running-transactions records (pg_log_standby_snapshot), without
	// which the creation waits for the primary's next one.
	Nudge func(ctx context.Context)
	// ReplayTimeout bounds the wait for the standby to replay the
	// publication; 0 means 1 minute.
	ReplayTimeout time.Duration
}

// Partitions is the partition scheme of outbox.* options.
type Partitions struct {
	Column   string        // outbox.time_column
	Interval time.Duration // outbox.partition_interval
	Ahead    int           // outbox.partitions_ahead
	Now      time.Time     // the time whose partition is the first created; zero: time.Now()
}

// Run creates what is missing, in order: each table with its partitions
// (with n.Partitions), the publication (or the tables it lacks), the
// records, the slot. It stops at the first error, returning the steps done
// so far. A publication it creates for a partitioned table publishes
// through the partition root (publish_via_partition_root), so every row
// arrives under the table's own name and partitions created later are
// included; one it adds a partitioned table to is switched to it first.
func Run(ctx context.Context, conn *pgx.Conn, n Names) ([]Step, error) {
	var steps []Step
	tables := n.tables()
	if len(tables) == 0 {
		return steps, errors.New("setup: no outbox table named (postgres.table)")
	}
	// A record of the slot in another listed table's schema (the list was
	// reordered) would read as missing below, and the slot be created
	// afresh without the proof it holds: refuse before creating anything.
	if err := slotrecord.Locate(ctx, conn, tables[0].Schema, config.SchemasOf(tables), n.Slot); err != nil {
		return steps, fmt.Errorf("setup: %w (nothing was created)", err)
	}

	partitioned := make([]bool, len(tables))
	for i, t := range tables {
		s, layout, err := ensureTable(ctx, conn, n, t, len(tables) > 1)
		steps = append(steps, s...)
		if err != nil {
			return steps, err
		}
		partitioned[i] = layout.Partitioned
	}

	s, err := ensurePublication(ctx, conn, n, tables, partitioned)
	steps = append(steps, s...)
	if err != nil {
		return steps, err
	}

	// walrelay's record of its slots (sql/005_slot_positions.sql), in the
	// first table's schema.
	records := slotrecord.Table{Schema: tables[0].Schema}
	created, err := records.Ensure(ctx, conn)
	if err != nil {
		return steps, err
	}
	steps = append(steps, Step{Object: "records", Name: records.String(), Created: created})

	// On a standby (n.Standby), the slot is created once the standby has
	// replayed what was created above: the slot decodes with the
	// standby's catalog, which must hold the publication.
	slotConn := conn
	if n.Standby != nil {
		timeout := n.Standby.ReplayTimeout
		if timeout <= 0 {
			timeout = time.Minute
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err := postgres.WaitReplayed(wctx, conn, n.Standby.Conn)
		cancel()
		if err != nil {
			return steps, err
		}
		slotConn = n.Standby.Conn
	}
	// Slots are cluster-wide: one of this name may belong to another
	// database or plugin, and must not be reported as ours.
	var plugin, database, current string
	var failover bool // PostgreSQL 17+; false before
	err = slotConn.QueryRow(ctx, `SELECT coalesce(s.plugin, ''), coalesce(s.database, ''), current_database(),
			coalesce((to_jsonb(s) ->> 'failover')::bool, false)
		FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, n.Slot).Scan(&plugin, &database, &current, &failover)
	if err != nil {
		return steps, fmt.Errorf("looking up slot %q: %w", n.Slot, err)
	}
	exists := database != ""
	switch {
	case exists && database != current:
		return steps, fmt.Errorf("replication slot %q already exists in database %q, not %q: choose another postgres.slot (slot names are cluster-wide)", n.Slot, database, current)
	case exists && plugin != "pgoutput":
		return steps, fmt.Errorf("replication slot %q already exists with plugin %q: walrelay needs pgoutput; choose another postgres.slot", n.Slot, plugin)
	}
	if !exists {
		// A slot walrelay confirmed through before is not created again
		// silently: rows after its record may be unpublished.
		st, err := slotrecord.Read(ctx, conn, records, n.Slot)
		if err != nil {
			return steps, err
		}
		if st.Record != nil {
			return steps, fmt.Errorf("%w: slot %q is missing, and walrelay had confirmed through a slot of this name up to %s (recorded %s): rows committed after that may never have been published. %s",
				slotrecord.ErrRecorded, n.Slot, st.Record.Confirmed, st.Record.UpdatedAt.UTC().Format(time.RFC3339), slotrecord.Fix(n.Slot, st.Record))
		}
	}
	if !exists && n.LeaveSlot {
		steps = append(steps, Step{Object: "slot", Name: n.Slot, Note: "not created: walrelay run creates it after the initial snapshot (snapshot.mode=initial)"})
		return steps, nil
	}
	if exists && n.Failover && !failover {
		note := "already exists; failover switched on"
		switch err := postgres.EnableFailover(ctx, slotConn, n.Slot); {
		case errors.Is(err, postgres.ErrSlotActive):
			note = "already exists; failover still off: a process holds the slot (walrelay run switches it on at its next start)"
		case err != nil:
			return steps, err
		}
		steps = append(steps, Step{Object: "slot", Name: n.Slot, Note: note})
		return steps, nil
	}
	if !exists {
		lsn, err := createSlot(ctx, slotConn, n)
		if err != nil {
			return steps, fmt.Errorf("creating replication slot %q: %w", n.Slot, err)
		}
		at, err := pglogrepl.ParseLSN(lsn)
		if err != nil {
			return steps, fmt.Errorf("parsing the position of new slot %q: %w", n.Slot, err)
		}
		if _, err := slotrecord.Created(ctx, conn, records, n.Slot, at, "walrelay setup"); err != nil {
			return steps, err
		}
	}
	steps = append(steps, Step{Object: "slot", Name: n.Slot, Created: !exists})
	return steps, nil
}

// createSlot creates the slot on conn, with n.Standby's Nudge running
// meanwhile, and returns its position.
func createSlot(ctx context.Context, conn *pgx.Conn, n Names) (string, error) {
	if n.Standby != nil && n.Standby.Nudge != nil {
		nctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.Standby.Nudge(nctx)
		}()
		defer func() {
			stop()
			<-done
		}()
	}
	create := `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`
	if n.Failover {
		create = `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', failover => true)`
	}
	var lsn string
	err := conn.QueryRow(ctx, create, n.Slot).Scan(&lsn)
	return lsn, err
}

// outboxDDL is the statement that creates an outbox table: sql/001's, or
// with partitions sql/outbox_partitioned.sql's (scheme's), for the quoted
// name table.
func outboxDDL(partitions bool, scheme partition.Scheme, table string) (string, error) {
	if partitions {
		return scheme.RootStatement()
	}
	if !strings.Contains(sqlfiles.OutboxTable, sqlfiles.CreateOutboxTable) {
		return "", fmt.Errorf("sql/001_outbox_table.sql no longer starts its statement with %q", sqlfiles.CreateOutboxTable)
	}
	return strings.Replace(sqlfiles.OutboxTable, sqlfiles.CreateOutboxTable, "CREATE TABLE IF NOT EXISTS "+table+" (", 1), nil
}

// DefaultLockTimeout is Names.LockTimeout when 0: long enough for the
// short transactions of an application writing an outbox, short enough
// that its writers of the added table are not held up long.
const DefaultLockTimeout = 10 * time.Second

func (n Names) lockTimeout() time.Duration {
	if n.LockTimeout > 0 {
		return n.LockTimeout
	}
	return DefaultLockTimeout
}

// timeColumn is n.TimeColumn, or the partition column.
func (n Names) timeColumn() string {
	if n.TimeColumn == "" && n.Partitions != nil {
		return n.Partitions.Column
	}
	return n.TimeColumn
}

// tables is n.Tables, or the one table n.Schema.n.Table.
func (n Names) tables() []config.TableName {
	if len(n.Tables) > 0 {
		return n.Tables
	}
	if n.Table == "" {
		return nil
	}
	schema := n.Schema
	if schema == "" {
		schema = "public"
	}
	return []config.TableName{{Schema: schema, Name: n.Table}}
}

// ensureTable creates table t when it is missing and, with n.Partitions,
// its partitions ahead. It returns its steps and the table's layout. With
// several tables (qualify), the partitions step names the schema.
func ensureTable(ctx context.Context, conn *pgx.Conn, n Names, t config.TableName, qualify bool) ([]Step, partition.Layout, error) {
	var steps []Step
	table := pgx.Identifier{t.Schema, t.Name}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return steps, partition.Layout{}, fmt.Errorf("looking up table %s: %w", table, err)
	}
	var scheme partition.Scheme
	if n.Partitions != nil {
		var err error
		if scheme, err = partition.NewScheme(t.String(), n.Partitions.Column, n.Partitions.Interval); err != nil {
			return steps, partition.Layout{}, err
		}
	}
	if !exists {
		ddl, err := outboxDDL(n.Partitions != nil, scheme, table)
		if err != nil {
			return steps, partition.Layout{}, err
		}
		if _, err := conn.Exec(ctx, ddl); err != nil {
			return steps, partition.Layout{}, fmt.Errorf("creating table %s: %w", table, err)
		}
	}
	steps = append(steps, Step{Object: "table", Name: t.String(), Created: !exists})

	layout, err := partition.Inspect(ctx, conn, t.String())
	if err != nil {
		return steps, layout, err
	}
	if n.Partitions == nil {
		return steps, layout, nil
	}
	switch {
	case !layout.Partitioned:
		return steps, layout, fmt.Errorf("table %s already exists as a plain table: outbox.partitioned does not convert it (create a partitioned table under another name and move to it, see docs/runbook.md, or set outbox.partitioned=false)", table)
	case !layout.RangeOn(scheme.Column):
		return steps, layout, fmt.Errorf("table %s already exists %s, not by range of outbox.time_column %q: fix outbox.time_column, or set outbox.partitioned=false", table, layout, scheme.Column)
	}
	now := n.Partitions.Now
	if now.IsZero() {
		now = time.Now()
	}
	created, err := scheme.EnsureAhead(ctx, conn, n.Partitions.Ahead, now)
	if err != nil {
		return steps, layout, err
	}
	first := scheme.Partition(scheme.Start(now))
	last := scheme.Partition(first.From.Add(time.Duration(n.Partitions.Ahead) * scheme.Interval))
	name := first.Name + ".." + last.Name
	if qualify {
		name = t.Schema + "." + name
	}
	steps = append(steps, Step{Object: "partitions", Name: name, Created: len(created) > 0})
	return steps, layout, nil
}
