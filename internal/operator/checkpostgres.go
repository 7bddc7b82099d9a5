package operator

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcatalog"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
)

// This file holds the preflight's Postgres items, in the order checker.run
// runs them: server version and settings, the role's privileges, the
// outbox's partitions (checkpartitions.go), the publications, the outbox
// columns (and the topics its rows route to), the slot and its WAL
// retention.

// minServerVersion is the oldest Postgres the relay streams from (pgoutput
// with messages 'true', wal_status in pg_replication_slots).
const minServerVersion = 140000

func (c *checker) serverVersion() {
	const name = "server version"
	var num int
	var text string
	if err := c.conn.QueryRow(c.ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version')`).Scan(&num, &text); err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	if num < minServerVersion {
		c.fail(name, "PostgreSQL "+text, "walrelay needs PostgreSQL 14 or newer: upgrade the server")
		return
	}
	c.ok(name, "PostgreSQL "+text)
}

func (c *checker) walLevel() {
	const name = "wal_level"
	v, err := c.setting("wal_level")
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	if v != "logical" {
		c.fail(name, "wal_level is "+v+"; logical decoding needs logical", c.walLevelFix())
		return
	}
	c.ok(name, "logical")
}

func (c *checker) slotExistsNow() (exists, active bool) {
	_ = c.conn.QueryRow(c.ctx, `SELECT true, active FROM pg_replication_slots WHERE slot_name = $1`, c.cfg.Postgres.Slot).Scan(&exists, &active)
	return exists, active
}

func (c *checker) slotHeadroom() {
	const name = "max_replication_slots"
	c.slotExists, c.slotActive = c.slotExistsNow()
	var max, used int
	err := c.conn.QueryRow(c.ctx, `SELECT current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_replication_slots)::int`).Scan(&max, &used)
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	detail := fmt.Sprintf("%d of %d in use", used, max)
	need := 1
	if c.slotExists {
		need = 0
	} else if c.cfg.Snapshot.Initial() {
		// The initial snapshot holds a temporary slot and copies it into
		// the permanent one: two slots at the moment of the copy.
		need = 2
	}
	switch free := max - used; {
	case free < need:
		c.fail(name, detail+"; no room for slot "+strconv.Quote(c.cfg.Postgres.Slot),
			fmt.Sprintf("drop unused slots (`walrelay slot list`, `walrelay slot drop NAME`) or raise max_replication_slots (ALTER SYSTEM SET max_replication_slots = %d;) and restart Postgres", max+2))
	case free == need:
		c.warn(name, detail+"; no room for another slot", fmt.Sprintf("raise max_replication_slots (ALTER SYSTEM SET max_replication_slots = %d;) and restart Postgres", max+2))
	default:
		c.ok(name, detail)
	}
}

func (c *checker) senderHeadroom() {
	const name = "max_wal_senders"
	var max, used int
	err := c.conn.QueryRow(c.ctx, `SELECT current_setting('max_wal_senders')::int, (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender')::int`).Scan(&max, &used)
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	detail := fmt.Sprintf("%d of %d in use", used, max)
	need := 1
	if c.slotActive {
		need = 0 // the running relay already has its walsender
	}
	switch free := max - used; {
	case free < need:
		c.fail(name, detail+"; no walsender left for walrelay",
			fmt.Sprintf("raise max_wal_senders (ALTER SYSTEM SET max_wal_senders = %d;) and restart Postgres", max+2))
	case free == need:
		c.warn(name, detail+"; walrelay would take the last one", fmt.Sprintf("raise max_wal_senders (ALTER SYSTEM SET max_wal_senders = %d;) and restart Postgres", max+2))
	default:
		c.ok(name, detail)
	}
}

func (c *checker) roleReplication() {
	name := "role REPLICATION"
	var super, member bool
	var err error
	c.replication, super, member, _, err = postgres.CanReplicate(c.ctx, c.conn)
	repl := c.replicationRole()
	if err != nil {
		c.fail(name, postgres.QueryError("reading the role", "", err).Error(), "")
		return
	}
	if !c.replication {
		lacks := fmt.Sprintf("role %q lacks REPLICATION", c.user)
		if repl != "" {
			lacks = fmt.Sprintf("role %q lacks REPLICATION and is not a member of %s", c.user, repl)
		}
		c.fail(name, lacks, c.roleFix())
		return
	}
	if member && !super {
		c.ok(name, fmt.Sprintf("role %q is a member of %s", c.user, repl))
		return
	}
	if super {
		c.ok(name, fmt.Sprintf("role %q is a superuser (sql/004_role.sql has a least-privilege role)", c.user))
		return
	}
	c.ok(name, fmt.Sprintf("role %q has REPLICATION", c.user))
}

// tableSelect runs the "SELECT on" item of each listed table, and looks
// each up for the items after it.
func (c *checker) tableSelect() {
	for _, t := range c.tables {
		c.tableSelectOf(t)
	}
}

func (c *checker) tableSelectOf(t *outboxTable) {
	name := "SELECT on " + t.String()
	qt := t.Quoted()
	var oid *uint32
	if err := c.conn.QueryRow(c.ctx, `SELECT to_regclass($1)::oid`, qt).Scan(&oid); err != nil {
		c.fail(name, postgres.QueryError("looking up "+t.String(), "", err).Error(), "")
		return
	}
	if oid == nil {
		c.fail(name, fmt.Sprintf("table %s does not exist (postgres.table)", t),
			"run `walrelay setup`, apply sql/001_outbox_table.sql, or fix postgres.table")
		return
	}
	t.oid = *oid
	var can bool
	if err := c.conn.QueryRow(c.ctx, `SELECT has_table_privilege($1::oid, 'SELECT')`, *oid).Scan(&can); err != nil {
		c.fail(name, postgres.QueryError("checking privileges on "+t.String(), "", err).Error(), "")
		return
	}
	if !can {
		c.fail(name, fmt.Sprintf("role %q cannot SELECT from %s", c.user, t),
			fmt.Sprintf("GRANT SELECT ON %s TO %s; (see sql/004_role.sql)", qt, pgx.Identifier{c.user}.Sanitize()))
		return
	}
	c.ok(name, fmt.Sprintf("role %q can read %s", c.user, t))
}

// existing is the listed tables that exist.
func (c *checker) existing() []*outboxTable {
	var out []*outboxTable
	for _, t := range c.tables {
		if t.oid != 0 {
			out = append(out, t)
		}
	}
	return out
}

// columns runs the "outbox columns" item of each listed table.
func (c *checker) columns() {
	for _, t := range c.tables {
		c.columnsOf(t)
	}
}

// columnsOf checks that t has the columns the router names and
// outbox.time_column. A missing time column fails when run prunes by it
// (outbox.retention), and is a warning otherwise: walrelay verify and a
// slot heal's search of Kafka need it too.
func (c *checker) columnsOf(t *outboxTable) {
	name := c.itemName("outbox columns", t)
	if t.oid == 0 {
		c.fail(name, fmt.Sprintf("table %s does not exist", t), "run `walrelay setup`, or fix postgres.table")
		return
	}
	catalog, err := pgcatalog.ReadColumns(c.ctx, c.conn, []uint32{t.oid})
	if err != nil {
		c.fail(name, postgres.QueryError("reading the columns of "+t.String(), "", err).Error(), "")
		return
	}
	cols := catalog[t.oid]
	plan, err := c.rt.Bind(router.Relation{ID: t.oid, Namespace: t.Schema, Name: t.Name, Columns: cols})
	if err != nil {
		c.fail(name, err.Error(), "set the router option to the column's name, or add the column to the table")
		return
	}
	timeCol := c.cfg.Outbox.TimeColumn
	hasTime := slices.ContainsFunc(cols, func(col router.Column) bool { return col.Name == timeCol })
	switch {
	case !hasTime && c.cfg.Outbox.Retention > 0:
		c.fail(name, fmt.Sprintf("%s has no column %q (outbox.time_column), which outbox.retention prunes by", t, timeCol),
			"set outbox.time_column to the event time column every table of postgres.table has, or add the column to "+t.String())
	case !hasTime:
		c.warn(name, fmt.Sprintf("every column the router config names exists, but %s has no column %q (outbox.time_column): walrelay verify, outbox.retention and a slot heal's search of Kafka need it", t, timeCol),
			"set outbox.time_column to the event time column every table of postgres.table has, or add the column to "+t.String())
	default:
		c.ok(name, "every column the router config names exists")
	}
	if !c.noTopics {
		c.routedTopics(t, plan, cols)
	}
}

// routedTopics collects the topics t's current rows route to, for the
// Kafka item: over the tables, their union.
func (c *checker) routedTopics(t *outboxTable, plan *router.Plan, cols []router.Column) {
	route := c.rt.Config().RouteByField
	idx := -1
	for i, col := range cols {
		if col.Name == route {
			idx = i
		}
	}
	if idx < 0 {
		return
	}
	q := fmt.Sprintf(`SELECT DISTINCT %s::text FROM %s WHERE %s IS NOT NULL LIMIT 100`,
		pgx.Identifier{route}.Sanitize(), t.Quoted(), pgx.Identifier{route}.Sanitize())
	rows, err := c.conn.Query(c.ctx, q)
	if err != nil {
		return // no SELECT: reported by its own item
	}
	values, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, v := range values {
		if topic, ok := topicOf(plan, len(cols), idx, v); ok {
			c.topics[topic] = true
		}
	}
}

// topicOf routes a row holding only the route value v (column idx of n)
// and returns its topic.
func topicOf(plan *router.Plan, n, idx int, v string) (string, bool) {
	tuple := make([]*pglogrepl.TupleDataColumn, n)
	for i := range tuple {
		tuple[i] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
	}
	tuple[idx] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(len(v)), Data: []byte(v)}
	msg, err := plan.Route(tuple, time.Now())
	if err != nil {
		return "", false
	}
	return msg.Topic, true
}

func (c *checker) slot() {
	slot := c.cfg.Postgres.Slot
	name := "slot " + slot
	s, err := postgres.InspectSlot(c.ctx, c.conn, slot)
	switch {
	case errors.Is(err, postgres.ErrSlotNotFound):
		switch {
		case !c.cfg.Postgres.CreateSlot:
			c.fail(name, "does not exist and postgres.create_slot is off", fmt.Sprintf("walrelay slot create %s (or walrelay setup), or set postgres.create_slot=true", slot))
		case !c.replication:
			c.fail(name, "does not exist, and the role cannot create it (no REPLICATION)", fmt.Sprintf("walrelay slot create %s as a role with REPLICATION, or %s", slot, c.roleFix()))
		case c.cfg.Snapshot.Initial():
			c.ok(name, "does not exist yet; walrelay run will publish the outbox's rows (snapshot.mode=initial) and then create it")
		default:
			c.ok(name, "does not exist yet; walrelay run will create it (postgres.create_slot)")
		}
		return
	case err != nil:
		c.fail(name, err.Error(), "")
		return
	}
	db, err := postgres.CurrentDatabase(c.ctx, c.conn)
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	if p := s.Problem(db); p != "" {
		c.fail(name, p, fmt.Sprintf("set postgres.slot to another name, or drop the slot (walrelay slot drop %s) if nothing uses it", slot))
		return
	}
	if s.WALStatus == "lost" {
		c.fail(name, "wal_status is lost: Postgres removed WAL the slot still needed; events in it are gone",
			fmt.Sprintf("recreate the slot (walrelay slot drop %s; walrelay slot create %s) and reconcile the outbox by hand", slot, slot))
		return
	}
	detail := fmt.Sprintf("pgoutput in %s, confirmed_flush_lsn %s", db, s.ConfirmedFlushLSN)
	if s.ConfirmedFlushLagBytes != nil {
		detail += ", " + postgres.HumanBytes(*s.ConfirmedFlushLagBytes) + " behind"
	}
	if c.syncedCopyItem(name, s) { // checkfailover.go
		return
	}
	if s.Active {
		detail += fmt.Sprintf(", in use by pid %d", s.ActivePID)
	}
	c.ok(name, detail)
}

func (c *checker) keepSize() {
	const name = "max_slot_wal_keep_size"
	v, err := c.setting("max_slot_wal_keep_size")
	if err != nil {
		c.fail(name, err.Error(), "")
		return
	}
	if v == "-1" {
		if fix := c.keepSizeFix(); fix != "" {
			c.warn(name, "unlimited: a stalled slot keeps WAL until the disk fills", fix)
		} else {
			c.warn(name, fmt.Sprintf("unlimited, and %s does not let you change it: a stalled slot keeps WAL until the disk fills", c.service.Name),
				"watch slot lag (walrelay status, walrelay_slot_lag_bytes) and drop a slot nothing reads")
		}
		return
	}
	mb, _ := strconv.ParseInt(v, 10, 64)
	c.ok(name, postgres.HumanBytes(mb<<20))
}
