package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// holdTopic makes the kfake broker refuse every produce to topic with a
// retriable error (NOT_ENOUGH_REPLICAS, rejected before it is appended), so
// the producer keeps retrying its records and none is acknowledged, until
// the returned handle is removed. Other topics are unaffected.
func holdTopic(t *testing.T, f *fixture, topic string) *kfake.FaultHandle {
	t.Helper()
	if f.broker.Cluster == nil {
		t.Skip("needs kfake to hold a topic")
	}
	return f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.NotEnoughReplicas, Count: -1})
}

// waitHits waits until h has refused at least n requests: the producer
// tried (and retried) the held topic.
func waitHits(t *testing.T, h *kfake.FaultHandle, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := h.Wait(ctx, n); err != nil {
		t.Fatalf("the held topic was produced to %d times, want %d: %v", h.Hits(), n, err)
	}
}

// checkHeldBelow checks, after a few of the relay's status reports, that
// the slot has not been confirmed to end: a record of that transaction is
// held by the broker.
func checkHeldBelow(t *testing.T, f *fixture, end pglogrepl.LSN) {
	t.Helper()
	time.Sleep(5 * f.cfg.Postgres.StatusInterval) // reports the relay could have sent
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Fatalf("confirmed_flush_lsn %s reached the transaction end %s while one of its records was not acknowledged", confirmed, end)
	}
}
