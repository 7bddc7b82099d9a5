package relay_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/config"
)

// The tables of a two-table fixture: two schemas, so the slot record's
// place (the first table's schema) is exercised too.
const (
	tableA = "public.outbox"
	tableB = "billing.outbox"
)

// newFixtureTables is newFixture with two outbox tables, public.outbox and
// billing.outbox (the same columns), both in publication walrelay_outbox and
// both in postgres.table, public.outbox first. It builds billing.outbox with
// SQL rather than with setup, so that the relay's tests do not depend on
// setup's handling of several tables.
func newFixtureTables(t *testing.T, mutate func(*config.Config), kafkaOpts ...kfake.Opt) *fixture {
	t.Helper()
	f := newFixture(t, func(c *config.Config) {
		c.Postgres.Table = config.StringList{tableA, tableB}
		if mutate != nil {
			mutate(c)
		}
	}, kafkaOpts...)
	execTx(t, f.dsn,
		`CREATE SCHEMA billing`,
		`CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`,
		`ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
	return f
}
