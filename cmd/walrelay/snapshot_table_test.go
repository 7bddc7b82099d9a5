package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay snapshot --table publishes the rows of the published tables it
// names only (an outbox table added to the publication when it already had
// rows, which the slot streams only from then on), and refuses a table no
// publication publishes.
func TestSnapshotBackfillTable(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, topic := range e.topics() {
		e.broker.CreateTopic(t, topic, 4)
	}
	testenv.Exec(t, e.dsn, `CREATE SCHEMA billing`)
	testenv.Exec(t, e.dsn, `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)
	testenv.Exec(t, e.dsn, `ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`)
	for table, n := range map[string]int{"public.outbox": 10, "billing.outbox": 7} {
		testenv.Exec(t, e.dsn, `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload)
			SELECT 'order', 'agg-' || g, 'T', '{}' FROM generate_series(1, $1::int) g`, n)
	}
	env := append(slices.Clone(e.env), "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox")

	stdout, stderr, code := walrelay(t, env, "snapshot", "--table", "billing.outbox", "-o", "json")
	var res struct {
		Tables []string `json:"tables"`
		Rows   int64    `json:"rows"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil {
		t.Fatalf("snapshot --table billing.outbox: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !slices.Equal(res.Tables, []string{"billing.outbox"}) || res.Rows != 7 {
		t.Fatalf("snapshot --table billing.outbox: tables %v, %d rows; want [billing.outbox], 7", res.Tables, res.Rows)
	}
	want := testenv.QueryValue[[]string](t, e.dsn, `SELECT array_agg(id::text ORDER BY id) FROM billing.outbox`)
	var got []string
	for _, r := range e.readAll(t) {
		got = append(got, testenv.Header(r, "id"))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("records of ids %v, want billing.outbox's %v", got, want)
	}

	_, stderr, code = walrelay(t, env, "snapshot", "--table", "public.nope")
	if code != 1 || !strings.Contains(stderr, "public.nope is in none of the publications") {
		t.Fatalf("snapshot --table public.nope: exit %d\n%s", code, stderr)
	}
	noStackTrace(t, "stderr", stderr)
}
