package relay_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the dead-letter table in docs/deadletter.md")

// A router-rejected row with a 2 MiB payload: its dead letter (the row's
// columns as JSON) is too large for the dead-letter topic, so it goes
// without its value, its size in walrelay.original.size; the relay goes
// on and confirms the row.
func TestRelayDeadLetterTooLargeGoesWithoutValue(t *testing.T) {
	f := newFixture(t, nil)
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	run := f.start(t)
	big := `{"blob": "` + strings.Repeat("z", 2<<20) + `"}`
	id, _ := insertRow(t, f.dsn, nil, "a-1", big)
	dl := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, 1, 30*time.Second)
	if got, _ := header(dl[0], deadletter.HeaderOutboxID); got != id {
		t.Fatalf("dead letter for %q, want %q", got, id)
	}
	if dl[0].Value != nil {
		t.Errorf("dead letter carries %d value bytes, want none", len(dl[0].Value))
	}
	size, _ := header(dl[0], deadletter.HeaderOriginalSize)
	var n int
	if _, err := fmt.Sscan(size, &n); err != nil || n <= 2<<20 {
		t.Errorf("walrelay.original.size %q, want the row's JSON size (over 2 MiB)", size)
	}
	f.waitCaughtUp(t, 15*time.Second)
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// A dead letter the broker refuses even without a value stops the relay,
// the row unconfirmed.
func TestRelayDeadLetterRefusedStops(t *testing.T) {
	f := newFixture(t, nil)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: f.cfg.Relay.DeadLetterTopic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	f.createProbe(t)
	run := f.start(t)
	_, xid := insertRow(t, f.dsn, nil, "a-1", `{}`)
	end := f.txEnd(t, xid)
	err := run.wait(30 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "dead letter") {
		t.Fatalf("Run = %v, want an error about the dead letter", err)
	}
	if confirmed, _ := f.slot(t); confirmed >= end {
		t.Errorf("confirmed_flush_lsn %s passed the row's transaction end %s", confirmed, end)
	}
}

// Every dead letter has one format: key = outbox id; headers id, the
// routed headers when routed, then the walrelay.* set in one order (the
// original topic only when the row was routed); value the row's columns
// (router classes) or the routed value (broker classes). The table in
// docs/deadletter.md is this test's output: -update rewrites it.
func TestDeadLetterFormatPerClass(t *testing.T) {
	// Avro keys, whose subject the registry refuses for one topic
	// (schema_rejected); the values stay raw, as in the other classes.
	reg := testenv.Registry(t)
	reg.Refuse("outbox.event.rejected-key", 409, 409, `Schema being registered is incompatible with an earlier schema for subject "outbox.event.rejected-key"`)
	f := newFixture(t, func(c *config.Config) {
		c.Router.FieldEventTimestamp = "created_at"
		c.Router.AdditionalPlacement = "type:header:eventType"
		c.Converter.Key, c.Converter.KeyRegistryURL = "avro", reg.URL()
	})
	if f.broker.Cluster == nil {
		t.Skip("needs kfake for its faults")
	}
	testenv.Exec(t, f.dsn, `ALTER TABLE outbox ALTER COLUMN aggregatetype DROP NOT NULL`)
	f.broker.Cluster.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.big", Err: kerr.MessageTooLarge, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.CreateTopics}, Topic: "outbox.event.denied", Err: kerr.PolicyViolation, Count: -1},
	)
	run := f.start(t)
	type row struct {
		class, aggregatetype, createdAt string
	}
	rows := []row{
		{"routing_value_missing", "", "2026-11-24 10:00:00+00"},
		{"topic_invalid", "bad topic!", "2026-11-24 10:00:00+00"},
		{"payload_invalid", "order", "2420-09-07 13:03:45.338+00"},
		{"record_too_large", "big", "2026-11-24 10:00:00+00"},
		{"topic_rejected", "denied", "2026-11-24 10:00:00+00"},
		{"schema_rejected", "rejected", "2026-11-24 10:00:00+00"},
	}
	ids := map[string]string{} // outbox id -> class
	for _, r := range rows {
		var typ any = r.aggregatetype
		if typ == "" {
			typ = nil
		}
		var id string
		conn := testenv.Connect(t, f.dsn)
		if err := conn.QueryRow(t.Context(), `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, created_at)
			VALUES (('00000000-0000-4000-8000-00000000000'||$1)::uuid, $2, 'agg-1', 'OrderPlaced', '{"total": 12.5}', $3) RETURNING id::text`,
			fmt.Sprint(len(ids)+1), typ, r.createdAt).Scan(&id); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close(t.Context())
		ids[id] = r.class
	}
	dls := f.broker.ReadAll(t, []string{f.cfg.Relay.DeadLetterTopic}, len(rows), 60*time.Second)
	lines := map[string]string{}
	for _, dl := range dls {
		id, _ := header(dl, deadletter.HeaderEventID)
		class := ids[id]
		if got, _ := header(dl, deadletter.HeaderErrorClass); got != class {
			t.Errorf("dead letter of %s has class %q, want %q", id, got, class)
		}
		if string(dl.Key) != id {
			t.Errorf("%s: key %q, want the outbox id %q", class, dl.Key, id)
		}
		lines[class] = describeDeadLetter(t, dl, id)
	}
	if len(lines) != len(rows) {
		t.Fatalf("dead letters for %d classes, want %d: %v", len(lines), len(rows), lines)
	}
	var table strings.Builder
	table.WriteString("| class | key | value | headers, in order |\n|---|---|---|---|\n")
	for _, r := range rows {
		table.WriteString(lines[r.class])
	}
	checkDocTable(t, "../../docs/deadletter.md", "deadletters", table.String())
	if err := run.stop(); err != nil {
		t.Fatalf("relay stopped with error: %v", err)
	}
}

// describeDeadLetter renders one table row: values that change from run
// to run (ids, LSNs, sizes of rows with ids and times) are named, not
// shown.
func describeDeadLetter(t *testing.T, r *kgo.Record, id string) string {
	t.Helper()
	class, _ := header(r, deadletter.HeaderErrorClass)
	var hs []string
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case deadletter.HeaderEventID, deadletter.HeaderOutboxID:
			if v != id {
				t.Errorf("%s: header %s = %q, want the outbox id", class, h.Key, v)
			}
			v = "outbox id"
		case deadletter.HeaderLSN:
			v = "the row's LSN, e.g. 0/1925D10"
		case deadletter.HeaderErrorMessage:
			if v == "" {
				t.Errorf("%s: empty error message", class)
			}
			v = "the error, one line"
		case deadletter.HeaderOriginalSize:
			if r.Value != nil && v != fmt.Sprint(len(r.Value)) {
				t.Errorf("%s: %s = %s, value has %d bytes", class, h.Key, v, len(r.Value))
			}
			v = "bytes of the value"
		default:
			v = "`" + v + "`"
		}
		hs = append(hs, "`"+h.Key+"`: "+v)
	}
	value := "`" + string(r.Value) + "`"
	var cols map[string]any
	if json.Unmarshal(r.Value, &cols) == nil && cols["aggregateid"] != nil {
		keys := make([]string, 0, len(cols))
		for k := range cols {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		value = "the row as JSON: " + strings.Join(keys, ", ")
	}
	return fmt.Sprintf("| `%s` | outbox id | %s | %s |\n", class, value, strings.Join(hs, "<br>"))
}

// checkDocTable compares the part of a doc between <!-- name:begin ... -->
// and <!-- name:end --> with want, or rewrites it with -update.
func checkDocTable(t *testing.T, path, name, want string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := strings.Cut(string(doc), "<!-- "+name+":begin")
	if !ok {
		t.Fatalf("%s has no %s:begin marker", path, name)
	}
	marker, rest, _ := strings.Cut(rest, "-->\n")
	got, tail, ok := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok {
		t.Fatalf("%s has no %s:end marker", path, name)
	}
	if got == want {
		return
	}
	if *update {
		out := head + "<!-- " + name + ":begin" + marker + "-->\n" + want + "<!-- " + name + ":end -->" + tail
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the table in %s is stale (rerun with -update if intended); want:\n%s", path, want)
}
