package main

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
)

// twoTables returns a database set up as `walrelay setup` does for
// public.outbox (publication walrelay_outbox, slot walrelay and its record
// in public), plus billing.outbox with the same columns, made by stmts
// (run after CREATE SCHEMA billing), and one row in each: aggregatetype
// order in public.outbox, invoice in billing.outbox.
func twoTables(t *testing.T, stmts ...string) string {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	for _, s := range stmts {
		testenv.Exec(t, dsn, s)
	}
	insertEvents(t, dsn, "order")
	testenv.Exec(t, dsn, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('invoice', 'inv-1', 'Billed', '{}')`)
	return dsn
}

const (
	billingOutbox    = `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`
	publishBilling   = `ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`
	bothTables       = "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox"
	alterAddBilling  = `ALTER PUBLICATION "walrelay_outbox" ADD TABLE "billing"."outbox";`
	noBillingInPub   = "does not contain billing.outbox"
	notRelayedDetail = "walrelay run would not relay its rows"
)

// `walrelay check` with postgres.table listing two tables in two schemas
// checks each of them: SELECT, partitions and columns (an item per table),
// the publications against both, the topics routed from both tables'
// rows; a published table the list leaves out is a warning; a slot record
// left in the schema of a table that is no longer listed first fails.
func TestCheckTables(t *testing.T) {
	broker := testenv.Kafka(t)
	brokers := "WALRELAY_KAFKA_BROKERS=" + strings.Join(broker.Addrs(), ",")

	t.Run("two tables", func(t *testing.T) {
		dsn := twoTables(t, billingOutbox, publishBilling)
		env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables)
		c, code := checkJSON(t, env)
		if code != 0 {
			t.Errorf("exit %d: %+v", code, c.Items)
		}
		for _, table := range []string{"public.outbox", "billing.outbox"} {
			c.want(t, "SELECT on "+table, operator.OK, []string{table}, nil)
			c.want(t, "outbox partitions of "+table, operator.OK, []string{"plain table"}, nil)
			c.want(t, "outbox columns of "+table, operator.OK, []string{"every column the router config names exists"}, nil)
		}
		c.want(t, "publication walrelay_outbox", operator.OK, []string{"contains public.outbox, billing.outbox, publishes inserts only"}, nil)
		// The topics routed from either table's rows: their union.
		c.want(t, "topic outbox.event.order", operator.OK, nil, nil)
		c.want(t, "topic outbox.event.invoice", operator.OK, nil, nil)
		c.want(t, "slot record", operator.OK, []string{"public.walrelay_slot_positions"}, nil)
	})

	t.Run("a published table not listed", func(t *testing.T) {
		// Run relays it, the rest leaves it alone: a warning, not a
		// failure.
		dsn := twoTables(t, billingOutbox, publishBilling,
			`CREATE TABLE public.audit_outbox (LIKE public.outbox INCLUDING ALL)`,
			`ALTER PUBLICATION walrelay_outbox ADD TABLE public.audit_outbox`,
			`CREATE PUBLICATION everything FOR ALL TABLES WITH (publish = 'insert')`)
		c, code := checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables))
		if code != 0 {
			t.Errorf("exit %d with a published table that is not listed: %+v", code, c.Items)
		}
		c.want(t, "unlisted tables of publication walrelay_outbox", operator.Warn,
			[]string{"publication walrelay_outbox publishes public.audit_outbox, which postgres.table does not list: run relays it, but retention, partition upkeep and verify leave it alone"},
			[]string{"add public.audit_outbox to postgres.table if it is an outbox table", `ALTER PUBLICATION "walrelay_outbox" DROP TABLE "public"."audit_outbox";`})

		// A FOR ALL TABLES publication (Debezium's default) publishes
		// every table: one item for all of them, and a fix that does not
		// try to drop a table from it.
		c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables, "WALRELAY_POSTGRES_PUBLICATIONS=everything"))
		c.want(t, "publication everything", operator.OK, []string{"contains public.outbox, billing.outbox"}, nil)
		it := c.item(t, "unlisted tables of publication everything")
		if it.Status != operator.Warn || !strings.Contains(it.Detail, "publication everything (FOR ALL TABLES) publishes public.audit_outbox, which postgres.table does not list") ||
			!strings.Contains(it.Fix, `CREATE PUBLICATION walrelay_outbox FOR TABLE "public"."outbox", "billing"."outbox" WITH (publish = 'insert');`) {
			t.Errorf("item %+v: want a warning naming public.audit_outbox and a publication of the listed tables as the fix", it)
		}
		if strings.Contains(it.Detail, "walrelay_slot_positions") {
			t.Errorf("the record table reported as an unlisted outbox table: %+v", it)
		}
	})

	t.Run("the record in the second table's schema", func(t *testing.T) {
		// Listed the other way round, the record (in public, where setup
		// wrote it) is no longer where walrelay looks: refused, with the
		// order that finds it.
		dsn := twoTables(t, billingOutbox, publishBilling)
		c, code := checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, "WALRELAY_POSTGRES_TABLE=billing.outbox,public.outbox"))
		if code != 1 {
			t.Errorf("exit %d with the record in the second table's schema, want 1", code)
		}
		c.want(t, "slot record", operator.Fail,
			[]string{`slot "walrelay" is recorded in public.walrelay_slot_positions`, "lists a table of schema billing first"},
			[]string{"reorder postgres.table so that a table of schema public comes first (public.outbox)"})
	})

	t.Run("a table in no publication", func(t *testing.T) {
		dsn := twoTables(t, billingOutbox, `CREATE PUBLICATION other FOR TABLE public.outbox WITH (publish = 'insert')`)
		c, code := checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables))
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		c.want(t, "publication walrelay_outbox", operator.Fail, []string{noBillingInPub, notRelayedDetail}, []string{alterAddBilling})
		c.want(t, "SELECT on billing.outbox", operator.OK, nil, nil)

		// With two publications, neither of which has it: each fails
		// (one table used to make this a warning).
		c, _ = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables, "WALRELAY_POSTGRES_PUBLICATIONS=walrelay_outbox,other"))
		for _, pub := range []string{"walrelay_outbox", "other"} {
			c.want(t, "publication "+pub, operator.Fail, []string{noBillingInPub, "no other publication of postgres.publications does"},
				[]string{`ALTER PUBLICATION "` + pub + `" ADD TABLE "billing"."outbox";`})
		}
	})

	t.Run("run refuses a table in no publication", func(t *testing.T) {
		dsn := twoTables(t, billingOutbox)
		env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables, "WALRELAY_LOG_FORMAT=json")
		// run refuses to start, in check's words, instead of pruning a
		// table it never relays.
		ch := startChild(t, env, "run", "--outbox.retention=24h")
		code := ch.wait(t, 60*time.Second)
		stderr := ch.stderr.String()
		if code == 0 {
			t.Errorf("run exit 0, want a refusal")
		}
		for _, want := range []string{"startup check failed", "publication walrelay_outbox: " + noBillingInPub, alterAddBilling} {
			if !strings.Contains(stderr, want) {
				t.Errorf("run's stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, `"msg":"ready`) {
			t.Errorf("run reported ready before refusing:\n%s", stderr)
		}
	})

	t.Run("a table without the time column", func(t *testing.T) {
		dsn := twoTables(t, billingOutbox, `ALTER TABLE billing.outbox DROP COLUMN created_at`, publishBilling)
		c, code := checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables, "WALRELAY_OUTBOX_RETENTION=24h"))
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		c.want(t, "outbox columns of billing.outbox", operator.Fail,
			[]string{`billing.outbox has no column "created_at" (outbox.time_column), which outbox.retention prunes by`},
			[]string{"set outbox.time_column"})
		c.want(t, "outbox columns of public.outbox", operator.OK, nil, nil)

		// Without retention, run does not read it: a warning.
		c, code = checkJSON(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, brokers, bothTables))
		if code != 0 {
			t.Errorf("exit %d without retention: %+v", code, c.Items)
		}
		c.want(t, "outbox columns of billing.outbox", operator.Warn, []string{`billing.outbox has no column "created_at"`, "walrelay verify"}, nil)
	})
}
