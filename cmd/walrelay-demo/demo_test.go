package main

import (
	"bytes"
	"context"
	"go/build"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The demo (make demo, the README's first command) relays its sample
// orders end to end on a private Postgres and kfake with the walrelay
// binary, written as outbox rows and as logical messages: every event it
// committed is read back from Kafka, per topic, with its event id header,
// none of the rolled-back order's; the slot's lag behind the last commit
// reaches 0, walrelay's /metrics counts the order topic's events, walrelay
// stops cleanly on SIGTERM, and the demo ends with the command to try
// next.
func TestDemoRelaysSampleOrders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Postgres cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := demo(ctx, "", &stdout, &stderr); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	// walrelay setup's own output, one line per object.
	if !regexp.MustCompile(`(?m)^==> \$ walrelay setup\n    table .*\n    publication .*\n    records .*\n    slot .*\n`).MatchString(out) {
		t.Errorf("demo does not show walrelay setup's output:\n%s", out)
	}
	// Per topic: a count, then the records.
	// The order topic has the example SQL's OrderCreated and OrderPaid
	// and the four committed orders'; the customer topic these orders'.
	for topic, n := range map[string]string{"outbox.event.order": "6", "outbox.event.customer": "4"} {
		if !strings.Contains(out, "\n    "+topic+": "+n+" records\n") {
			t.Errorf("demo does not report %s records on %s:\n%s", n, topic, out)
		}
	}
	records := regexp.MustCompile(`(?m)^      partition=\d+ offset=\d+ key=\S+ headers=\[id=[0-9a-f-]{36}\]$`).FindAllString(out, -1)
	if len(records) != 10 {
		t.Errorf("demo printed %d records with an id header, want 10:\n%s", len(records), out)
	}
	if !strings.Contains(out, "==> done: 10 events relayed\n") {
		t.Errorf("demo did not report 10 events relayed:\n%s", out)
	}
	// Both outbox styles: four events written as rows (their jsonb
	// payload as Postgres prints it), four as logical messages (the
	// payload as written); the rolled-back order's never.
	for style, want := range map[string]int{`"style": "row"`: 4, `"style":"message"`: 4} {
		if got := strings.Count(out, style); got != want {
			t.Errorf("demo output has %q %d times, want %d:\n%s", style, got, want, out)
		}
	}
	// The rolled-back order's customer, c-9, by the key and payload fields
	// that would name it: the output also holds random UUIDv7 ids, in
	// which "c-9" can stand as a substring.
	if got := regexp.MustCompile(`(?m)( key=c-9 |"customerId":\s*"c-9")`).FindAllString(out, -1); len(got) != 0 {
		t.Errorf("demo output has the rolled-back order's events (%q):\n%s", got, out)
	}
	if !regexp.MustCompile(`(?m)^==> the rolled-back order \(id \d+, customer c-9\) is absent: `).MatchString(out) {
		t.Errorf("demo does not say the rolled-back order is absent:\n%s", out)
	}
	// The slot's lag, read with walrelay slot inspect, down to 0.
	lags := regexp.MustCompile(`(?m)^    confirmed_flush_lsn [0-9A-F]+/[0-9A-F]+ +lag behind the last order's commit: (.+)$`).FindAllStringSubmatch(out, -1)
	if len(lags) == 0 || lags[len(lags)-1][1] != "0 B" {
		t.Errorf("demo does not show the slot's lag reaching 0 (%q):\n%s", lags, out)
	}
	if !regexp.MustCompile(`(?m)^    walrelay_events_published_total\{topic="outbox\.event\.order"\} 6$`).MatchString(out) {
		t.Errorf("demo does not show walrelay's metric of the order topic's 6 events:\n%s", out)
	}
	if !strings.Contains(out, "\n    walrelay run exited 0\n") {
		t.Errorf("demo does not show walrelay stopping cleanly:\n%s", out)
	}
	// walrelay's own log went to stderr.
	if !strings.Contains(stderr.String(), `walrelay: `) || !strings.Contains(stderr.String(), "streaming from slot") {
		t.Errorf("walrelay run's log is not on stderr:\n%s", stderr.String())
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "    walrelay check --postgres.dsn ") {
		t.Errorf("demo does not end with the next command to try; last line %q", last)
	}
}

// The demo shows the product: it runs the walrelay binary, not the
// relay's packages in its own process.
func TestDemoRunsTheBinary(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"github.com/walrelay/walrelay/internal/relay", "github.com/walrelay/walrelay/internal/setup", "github.com/walrelay/walrelay/internal/config"} {
		if slices.Contains(p.Imports, pkg) {
			t.Errorf("walrelay-demo imports %s: it must run the walrelay binary instead", pkg)
		}
	}
}
