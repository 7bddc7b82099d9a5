package main

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestVerifyCommandTwoTables: with WALRELAY_POSTGRES_TABLE listing two
// tables in two schemas, verify reads both: -o json has the rows of both,
// tables and table; records of the second table's rows deleted from their
// topic make it exit 1 naming both tables and the missing ids; --republish
// exits 0.
func TestVerifyCommandTwoTables(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	for _, sql := range []string{
		`CREATE SCHEMA billing`,
		`CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`,
		`ALTER PUBLICATION walrelay_outbox ADD TABLE billing.outbox`,
	} {
		testenv.Exec(t, e.dsn, sql)
	}
	env := append(slices.Clone(e.env), "WALRELAY_POSTGRES_TABLE=public.outbox,billing.outbox")
	a := insertEvents(t, e.dsn, slices.Repeat([]string{"order"}, 10)...)
	var b []string
	for i := range 12 {
		b = append(b, testenv.QueryValue[string](t, e.dsn, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload)
			VALUES ('customer', 'agg-' || $1::int, 'Invoiced', '{}') RETURNING id::text`, i))
	}
	relay := startChild(t, env, "run")
	recs := e.broker.ReadAll(t, e.topics(), len(a)+len(b), 60*time.Second)

	raw := wantOK(t, env, "verify", "-o", "json", "--until", "0s")
	got := decodeJSON[struct {
		verifyJSONOut
		Tables []string `json:"tables"`
		Table  string   `json:"table"`
	}](t, raw)
	if got.Rows != int64(len(a)+len(b)) || !slices.Equal(got.Tables, []string{`"public"."outbox"`, `"billing"."outbox"`}) || got.Table != `"public"."outbox", "billing"."outbox"` {
		t.Errorf("healthy verify of two tables: rows %d tables %q table %q, want %d rows and both tables", got.Rows, got.Tables, got.Table, len(a)+len(b))
	}

	// The first two records of the fullest partition of billing.outbox's topic.
	count := map[int32]int{}
	var p int32
	for _, r := range recs {
		if r.Topic == e.topics()[1] {
			if count[r.Partition]++; count[r.Partition] > count[p] {
				p = r.Partition
			}
		}
	}
	var removed []string
	for _, r := range recs {
		if r.Topic == e.topics()[1] && r.Partition == p && r.Offset < 2 {
			removed = append(removed, testenv.Header(r, "id"))
		}
	}
	if len(removed) != 2 {
		t.Fatalf("%d records of %s[%d] before offset 2, want 2", len(removed), e.topics()[1], p)
	}
	cut := kadm.Offsets{}
	cut.Add(kadm.Offset{Topic: e.topics()[1], Partition: p, At: 2})
	if _, err := kadm.NewClient(e.broker.Client(t)).DeleteRecords(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := walrelay(t, env, "verify", "--until", "0s")
	if code != 1 || !strings.Contains(stdout, `of tables "public"."outbox", "billing"."outbox", margin`) || !strings.Contains(stdout, "missing: 2\n") ||
		!strings.Contains(stdout, removed[0]) || !strings.Contains(stdout, removed[1]) {
		t.Errorf("verify after deleting 2 records of billing.outbox's rows (%v): exit %d\n%s", removed, code, stdout)
	}
	stdout, _, code = walrelay(t, env, "verify", "--until", "0s", "--republish")
	if code != 0 || !strings.Contains(stdout, "republished: 2 sent, 2 acknowledged, 0 failed") {
		t.Errorf("verify --republish: exit %d\n%s", code, stdout)
	}
	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Errorf("walrelay run exited %d", code)
	}
}
