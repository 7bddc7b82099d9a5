package operator

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
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

// Check runs the preflight for cfg: Postgres settings, privileges, the
// outbox's partitions, publication, outbox columns (each of them for every
// table of postgres.table), published tables postgres.table does not list,
// where the slot's record is, slot, failover slots and standbys, WAL
// retention,
// then Kafka, and with relay.delivery=exactly_once Kafka transactions and
// the checkpoint topic, then the schema registry of an avro converter. It changes nothing on either side (it never initializes the
// relay's transactional id, which would fence a running relay). It never
// stops early on a failed item, except that Postgres items after a failed
// connection are not run.
func Check(ctx context.Context, cfg config.Config) []Item {
	rt, err := router.New(cfg.Router, cfg.Converter)
	if err != nil { // validated by config
		return []Item{{Name: "router config", Status: Fail, Detail: err.Error(), Fix: "fix the router options"}}
	}
	var items []Item
	add := func(it Item) { items = append(items, it) }
	for _, in := range rt.Inert() {
		add(Item{Name: "router option " + in.Option, Status: Warn, Detail: fmt.Sprintf("%s=%s has no effect: %s", in.Option, in.Value, in.Reason),
			Fix: "remove it, or see the reason"})
	}
	topics := map[string]bool{}
	txnID := cfg.Kafka.TransactionalID // exactly-once only; "" until derived
	conn, err := postgres.Connect(ctx, cfg.Postgres.DSN)
	if err != nil {
		add(Item{Name: "postgres connection", Status: Fail, Detail: err.Error(), Fix: "fix postgres.dsn or the server (see the message)"})
	} else {
		defer conn.Close(context.WithoutCancel(ctx))
		c := newChecker(ctx, conn, cfg, rt, add)
		c.topics = topics
		c.run()
		if cfg.Relay.ExactlyOnce() {
			txnID = transactionalID(ctx, cfg, conn)
		}
	}
	if dlq(cfg.Relay.OnError) {
		topics[cfg.Relay.DeadLetterTopic] = true
	}
	for _, it := range checkKafka(ctx, cfg, topics, txnID) {
		add(it)
	}
	for _, it := range checkRegistry(ctx, cfg, rt, topics) { // checkregistry.go: only with an avro converter
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
	for _, c := range router.OnErrorClasses() {
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
	service     *postgres.Managed // the managed service the server belongs to; nil: self-managed
	replication bool
	tables      []*outboxTable // postgres.table, in list order
	slotExists  bool
	slotActive  bool
	noTopics    bool // CheckRun: no scan of the outbox for its topics
}

// outboxTable is one table of postgres.table and what the items found of
// it: the items after "SELECT on" read it.
type outboxTable struct {
	config.TableName
	oid         uint32 // 0: missing (or not looked up)
	partitioned bool   // a partitioned table
}

// newChecker returns a checker of cfg on conn, with one outboxTable per
// listed table.
func newChecker(ctx context.Context, conn *pgx.Conn, cfg config.Config, rt *router.Router, add func(Item)) *checker {
	c := &checker{ctx: ctx, conn: conn, cfg: cfg, rt: rt, add: add, topics: map[string]bool{}}
	for _, t := range cfg.Postgres.Tables() {
		c.tables = append(c.tables, &outboxTable{TableName: t})
	}
	return c
}

// itemName is the name of a per-table item: base alone when postgres.table
// lists one table (the names check always gave), "base of schema.table"
// when it lists several, so that each table's item has a name of its own.
func (c *checker) itemName(base string, t *outboxTable) string {
	if len(c.tables) == 1 {
		return base
	}
	return base + " of " + t.String()
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
		return "", postgres.QueryError("reading setting "+name, "", err)
	}
	return v, nil
}

func (c *checker) run() {
	c.user = postgres.CurrentUser(c.ctx, c.conn)
	c.serverVersion()
	c.managedService()
	c.walLevel()
	c.standby() // checkstandby.go: decoding from a standby
	c.slotHeadroom()
	c.senderHeadroom()
	c.roleReplication()
	c.tableSelect()
	c.outboxPartitions()
	pubs := c.publications() // checkpublications.go
	c.columns()
	c.unlistedTables(pubs)
	c.recordLocation() // checkrecord.go
	c.slot()
	c.failover() // checkfailover.go
	c.keepSize()
}
