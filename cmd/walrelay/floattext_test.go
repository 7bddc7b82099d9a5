package main

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Every place that reads a row as text reads it as `walrelay run`'s
// stream does (internal/pgsession pins the same session settings on each
// connection): on a database whose extra_float_digits is 0, which rounds
// float8 to 15 digits, a float8 aggregate id 0.1+0.2 is the key
// 0.30000000000000004 in what run publishes, in what `slot peek` shows
// (pgoutput runs in the peeking session) and in what `verify --republish`
// publishes again (it reads the row on a connection of its own). Before
// the one map of settings, peek and verify printed 0.3.
func TestFloatTextAsRunPublishes(t *testing.T) {
	const want = "0.30000000000000004" // float8 0.1 + 0.2 as extra_float_digits=3 prints it
	e := newE2E(t)
	if e.broker.Cluster == nil {
		t.Fatal("needs the in-process kfake broker to delete records")
	}
	e.setup(t, "created")
	cfg, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.dsn, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" SET extra_float_digits = 0")
	testenv.Exec(t, e.dsn, `ALTER TABLE outbox ALTER COLUMN aggregateid TYPE float8 USING 0`)
	testenv.Exec(t, e.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 0.1::float8 + 0.2::float8, 'Happened', '{}')`)
	if got := testenv.QueryValue[string](t, e.dsn, `SELECT aggregateid::text FROM outbox`); got != "0.3" {
		t.Fatalf("the database's extra_float_digits=0 prints %q; want 0.3 (the test's premise)", got)
	}

	res := decodeJSON[operator.PeekResult](t, wantOK(t, e.env, "slot", "peek", "walrelay", "-o", "json"))
	if len(res.Events) != 1 || res.Events[0].Key == nil {
		t.Fatalf("peek: %+v, want one event with a key", res.Events)
	}
	if got := *res.Events[0].Key; got != want {
		t.Errorf("slot peek shows key %q; want %q", got, want)
	}

	startChild(t, e.env, "run")
	recs := e.broker.ReadAll(t, e.topics(), 1, 60*time.Second)
	if got := string(recs[0].Key); got != want {
		t.Fatalf("walrelay run published key %q; want %q", got, want)
	}
	_, current := e.slot(t)
	e.waitConfirmed(t, current, 30*time.Second)

	// The record is lost on the broker: verify republishes it from the row.
	cut := kadm.Offsets{}
	cut.Add(kadm.Offset{Topic: recs[0].Topic, Partition: recs[0].Partition, At: recs[0].Offset + 1})
	if _, err := kadm.NewClient(e.broker.Client(t)).DeleteRecords(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := walrelay(t, e.env, "verify", "--republish", "-o", "json", "--until", "0s")
	got := decodeJSON[verifyJSONOut](t, stdout)
	if code != 0 || got.Republished == nil || got.Republished.Acknowledged != 1 {
		t.Fatalf("verify --republish: exit %d, republished %+v, want exit 0 and 1 acknowledged\n%s", code, got.Republished, stderr)
	}
	again := e.broker.ReadAll(t, e.topics(), 1, 60*time.Second) // the republished record, after the deleted one
	if got := string(again[0].Key); got != want {
		t.Errorf("verify --republish published key %q; want %q", got, want)
	}
}
