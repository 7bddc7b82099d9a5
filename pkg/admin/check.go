package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/pkg/config"
	"github.com/walrelay/walrelay/pkg/publisher"
	"github.com/walrelay/walrelay/pkg/router"
)

// Outcome of one check item.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
)

// Item is one preflight check: what was checked, the outcome, what was
// found, and for a warning or failure, how to fix it.
type Item struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// minServerVersion is the oldest Postgres the relay streams from (pgoutput
// with messages 'true', wal_status in pg_replication_slots).
const minServerVersion = 140000

// kafkaTimeout bounds each Kafka request of the check.
const kafkaTimeout = 5 * time.Second

// Check runs the preflight for cfg: Postgres settings, privileges,
// publication, outbox columns, slot, WAL retention, then Kafka. It never
// stops early on a failed item, except that Postgres items after a failed
// connection are not run.
func Check(ctx context.Context, cfg config.Config) []Item {
	rt, err := router.New(cfg.Router)
	if err != nil { // validated by config
		return []Item{{Name: "router config", Status: Fail, Detail: err.Error(), Fix: "fix the router options"}}
	}
	var items []Item
	add := func(it Item) { items = append(items, it) }
	topics := map[string]bool{}
	conn, err := Connect(ctx, cfg.Postgres.DSN)
	if err != nil {
		add(Item{Name: "postgres connection", Status: Fail, Detail: err.Error(), Fix: "fix postgres.dsn or the server (see the message)"})
	} else {
		defer conn.Close(context.WithoutCancel(ctx))
		c := &checker{ctx: ctx, conn: conn, cfg: cfg, rt: rt, add: add, topics: topics}
		c.run()
	}
	if dlq(cfg.Relay.OnError) {
		topics[cfg.Relay.DeadLetterTopic] = true
	}
	for _, it := range checkKafka(ctx, cfg, topics) {
		add(it)
	}
	return items
}

// Failed reports whether any item failed.
func Failed(items []Item) bool {
	for _, it := range items {
		if it.Status == Fail {
			return true
		}
	}
	return false
}

func dlq(p config.ErrorPolicies) bool {
	for _, c := range []string{"routing_value_missing", "topic_invalid", "payload_invalid", "record_too_large", "topic_rejected"} {
		if v, _ := p.Policy(c); v == config.PolicyDLQ {
			return true
		}
	}
	return false
}

type checker struct {
	ctx    context.Context
	conn   *pgx.Conn
	cfg    config.Config
	rt     *router.Router
	add    func(Item)
	topics map[string]bool

	user        string
	replication bool
	tableOID    uint32 // 0: missing
	slotExists  bool
	slotActive  bool
}

func (c *checker) fail(name, detail, fix string) {
	c.add(Item{Name: name, Status: Fail, Detail: detail, Fix: fix})
}
func (c *checker) warn(name, detail, fix string) {
	c.add(Item{Name: name, Status: Warn, Detail: detail, Fix: fix})
}
func (c *checker) ok(name, detail string) { c.add(Item{Name: name, Status: OK, Detail: detail}) }

func (c *checker) setting(name string) (string, error) {
	var v string
	err := c.conn.QueryRow(c.ctx, `SELECT setting FROM pg_settings WHERE name = $1`, name).Scan(&v)
	if err != nil {
		return "", queryError("reading setting "+name, "", err)
	}
	return v, nil
}

func (c *checker) run() {
	c.user = currentUser(c.ctx, c.conn)
	c.serverVersion()
	c.walLevel()
	c.slotHeadroom()
	c.senderHeadroom()
	c.roleReplication()
	c.tableSelect()
	c.publications()
	c.columns()
	c.slot()
	c.keepSize()
}

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
		c.fail(name, "wal_level is "+v+"; logical decoding needs logical",
			"set wal_level = logical (ALTER SYSTEM SET wal_level = logical;) and restart Postgres")
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
	var super bool
	err := c.conn.QueryRow(c.ctx, `SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&c.replication, &super)
	if err != nil {
		c.fail(name, queryError("reading the role", "", err).Error(), "")
		return
	}
	c.replication = c.replication || super
	if !c.replication {
		c.fail(name, fmt.Sprintf("role %q lacks REPLICATION", c.user), fmt.Sprintf("ALTER ROLE %s REPLICATION; (see sql/004_role.sql)", pgx.Identifier{c.user}.Sanitize()))
		return
	}
	if super {
		c.ok(name, fmt.Sprintf("role %q is a superuser (sql/004_role.sql has a least-privilege role)", c.user))
		return
	}
	c.ok(name, fmt.Sprintf("role %q has REPLICATION", c.user))
}

func (c *checker) quotedTable() string {
	schema, table, _ := config.SplitTable(c.cfg.Postgres.Table) // validated
	return pgx.Identifier{schema, table}.Sanitize()
}

func (c *checker) tableSelect() {
	name := "SELECT on " + c.cfg.Postgres.Table
	qt := c.quotedTable()
	var oid *uint32
	if err := c.conn.QueryRow(c.ctx, `SELECT to_regclass($1)::oid`, qt).Scan(&oid); err != nil {
		c.fail(name, queryError("looking up "+c.cfg.Postgres.Table, "", err).Error(), "")
		return
	}
	if oid == nil {
		c.fail(name, fmt.Sprintf("table %s does not exist (postgres.table)", c.cfg.Postgres.Table),
			"run `walrelay setup`, apply sql/001_outbox_table.sql, or fix postgres.table")
		return
	}
	c.tableOID = *oid
	var can bool
	if err := c.conn.QueryRow(c.ctx, `SELECT has_table_privilege($1::oid, 'SELECT')`, *oid).Scan(&can); err != nil {
		c.fail(name, queryError("checking privileges on "+c.cfg.Postgres.Table, "", err).Error(), "")
		return
	}
	if !can {
		c.fail(name, fmt.Sprintf("role %q cannot SELECT from %s", c.user, c.cfg.Postgres.Table),
			fmt.Sprintf("GRANT SELECT ON %s TO %s; (see sql/004_role.sql)", qt, pgx.Identifier{c.user}.Sanitize()))
		return
	}
	c.ok(name, fmt.Sprintf("role %q can read %s", c.user, c.cfg.Postgres.Table))
}

func (c *checker) publications() {
	schema, table, _ := config.SplitTable(c.cfg.Postgres.Table)
	qt := c.quotedTable()
	pubs := c.cfg.Postgres.Publications
	for _, pub := range pubs {
		name := "publication " + pub
		qp := pgx.Identifier{pub}.Sanitize()
		var ins, upd, del bool
		err := c.conn.QueryRow(c.ctx, `SELECT pubinsert, pubupdate, pubdelete FROM pg_publication WHERE pubname = $1`, pub).Scan(&ins, &upd, &del)
		if errors.Is(err, pgx.ErrNoRows) {
			c.fail(name, fmt.Sprintf("publication %q does not exist (postgres.publications)", pub),
				fmt.Sprintf("run `walrelay setup`, or CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert');", qp, qt))
			continue
		}
		if err != nil {
			c.fail(name, queryError("reading publication "+pub, "", err).Error(), "")
			continue
		}
		var has bool
		if err := c.conn.QueryRow(c.ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)`, pub, schema, table).Scan(&has); err != nil {
			c.fail(name, queryError("reading publication "+pub, "", err).Error(), "")
			continue
		}
		switch {
		case !has && len(pubs) == 1:
			c.fail(name, fmt.Sprintf("does not contain %s", c.cfg.Postgres.Table), fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s;", qp, qt))
		case !has:
			c.warn(name, fmt.Sprintf("does not contain %s", c.cfg.Postgres.Table), fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s; if it should carry the outbox", qp, qt))
		case !ins:
			c.fail(name, "does not publish inserts", fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert');", qp))
		case upd || del:
			c.warn(name, fmt.Sprintf("contains %s and publishes updates or deletes too (they are ignored or follow table.op.invalid.behavior)", c.cfg.Postgres.Table),
				fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert');", qp))
		default:
			c.ok(name, fmt.Sprintf("contains %s, publishes inserts only", c.cfg.Postgres.Table))
		}
	}
}

func (c *checker) columns() {
	name := "outbox columns"
	if c.tableOID == 0 {
		c.fail(name, fmt.Sprintf("table %s does not exist", c.cfg.Postgres.Table), "run `walrelay setup`, or fix postgres.table")
		return
	}
	rows, err := c.conn.Query(c.ctx, `SELECT attname::text, atttypid::int8 FROM pg_attribute WHERE attrelid = $1::oid AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, c.tableOID)
	if err != nil {
		c.fail(name, queryError("reading columns", "", err).Error(), "")
		return
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (router.Column, error) {
		var col router.Column
		var oid int64
		err := r.Scan(&col.Name, &oid)
		col.TypeOID = uint32(oid)
		return col, err
	})
	if err != nil {
		c.fail(name, queryError("reading columns", "", err).Error(), "")
		return
	}
	schema, table, _ := config.SplitTable(c.cfg.Postgres.Table)
	plan, err := c.rt.Bind(router.Relation{ID: c.tableOID, Namespace: schema, Name: table, Columns: cols})
	if err != nil {
		c.fail(name, err.Error(), "set the router option to the column's name, or add the column to the table")
		return
	}
	c.ok(name, "every column the router config names exists")
	c.routedTopics(plan, cols)
}

// routedTopics collects the topics the outbox's current rows route to, for
// the Kafka item.
func (c *checker) routedTopics(plan *router.Plan, cols []router.Column) {
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
		pgx.Identifier{route}.Sanitize(), c.quotedTable(), pgx.Identifier{route}.Sanitize())
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
	s, err := InspectSlot(c.ctx, c.conn, slot)
	switch {
	case errors.Is(err, ErrSlotNotFound):
		switch {
		case !c.cfg.Postgres.CreateSlot:
			c.fail(name, "does not exist and postgres.create_slot is off", fmt.Sprintf("walrelay slot create %s (or walrelay setup), or set postgres.create_slot=true", slot))
		case !c.replication:
			c.fail(name, "does not exist, and the role cannot create it (no REPLICATION)", fmt.Sprintf("walrelay slot create %s as a role with REPLICATION, or ALTER ROLE %s REPLICATION;", slot, pgx.Identifier{c.user}.Sanitize()))
		default:
			c.ok(name, "does not exist yet; walrelay run will create it (postgres.create_slot)")
		}
		return
	case err != nil:
		c.fail(name, err.Error(), "")
		return
	}
	db, err := CurrentDatabase(c.ctx, c.conn)
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
		detail += ", " + HumanBytes(*s.ConfirmedFlushLagBytes) + " behind"
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
		c.warn(name, "unlimited: a stalled slot keeps WAL until the disk fills",
			"set a cap (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf();) and watch slot lag")
		return
	}
	mb, _ := strconv.ParseInt(v, 10, 64)
	c.ok(name, HumanBytes(mb<<20))
}

// checkKafka checks the brokers answer and that each topic exists or may
// be created.
func checkKafka(ctx context.Context, cfg config.Config, topics map[string]bool) []Item {
	brokers := strings.Join(cfg.Kafka.Brokers, ",")
	opts, err := kafkaOpts(cfg.Kafka)
	if err != nil {
		return []Item{{Name: "kafka brokers", Status: Fail, Detail: err.Error(), Fix: "fix kafka.tls.* / kafka.sasl.*"}}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return []Item{{Name: "kafka brokers", Status: Fail, Detail: err.Error(), Fix: "fix kafka.brokers"}}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	bctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	bs, err := adm.ListBrokers(bctx)
	if err != nil {
		return []Item{{Name: "kafka brokers", Status: Fail, Detail: fmt.Sprintf("no broker of %s answered: %v", brokers, err),
			Fix: "check kafka.brokers (host:port of the listeners) and that the brokers are up and reachable from here"}}
	}
	items := []Item{{Name: "kafka brokers", Status: OK, Detail: fmt.Sprintf("%d broker(s) answered via %s", len(bs), brokers)}}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return append(items, Item{Name: "kafka topics", Status: OK, Detail: "no routed topic known yet (the outbox has no rows to route); topics follow router.route.topic.replacement"})
	}
	tctx, cancel2 := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel2()
	details, err := adm.ListTopics(tctx, names...)
	if err != nil {
		return append(items, Item{Name: "kafka topics", Status: Fail, Detail: fmt.Sprintf("listing topics: %v", err), Fix: "grant walrelay's principal DESCRIBE on the topics"})
	}
	var missing []string
	for _, t := range names {
		if details.Has(t) {
			items = append(items, Item{Name: "topic " + t, Status: OK, Detail: "exists"})
		} else {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return items
	}
	if !cfg.Kafka.CreateTopics {
		for _, t := range missing {
			items = append(items, Item{Name: "topic " + t, Status: Fail, Detail: "does not exist and kafka.create_topics is off", Fix: "create the topic, or set kafka.create_topics=true"})
		}
		return items
	}
	configs := map[string]*string{}
	for k, v := range cfg.Kafka.TopicConfigs {
		configs[k] = kadm.StringPtr(v)
	}
	vctx, cancel3 := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel3()
	resps, err := adm.ValidateCreateTopics(vctx, cfg.Kafka.TopicPartitions, cfg.Kafka.TopicReplicationFactor, configs, missing...)
	for _, t := range missing {
		r, ok := resps[t]
		switch {
		case err != nil:
			items = append(items, Item{Name: "topic " + t, Status: Fail, Detail: fmt.Sprintf("does not exist, and validating its creation failed: %v", err), Fix: "create the topic, or grant walrelay's principal CREATE"})
		case !ok || r.Err != nil:
			why := "no answer"
			if ok {
				why = r.Err.Error()
				if r.ErrMessage != "" {
					why += ": " + r.ErrMessage
				}
			}
			items = append(items, Item{Name: "topic " + t, Status: Fail, Detail: "does not exist and the broker would refuse to create it: " + why, Fix: "create the topic by hand, or fix kafka.topic_* options and the principal's CREATE permission"})
		default:
			items = append(items, Item{Name: "topic " + t, Status: OK, Detail: "does not exist yet; walrelay will create it (kafka.create_topics)"})
		}
	}
	return items
}

// kafkaOpts are the client options the relay's publisher would connect
// with: brokers, client id, TLS and SASL.
func kafkaOpts(k config.Kafka) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.ClientID(k.ClientID), kgo.DialTimeout(3 * time.Second)}
	if k.TLS.Enabled {
		tc, err := publisher.TLSConfig(k.TLS.CAFile, k.TLS.CertFile, k.TLS.KeyFile, k.TLS.ServerName)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	mech, err := publisher.SASLMechanism(k.SASL.Mechanism, k.SASL.Username, k.SASL.Password)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}
