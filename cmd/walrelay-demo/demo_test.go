package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The demo (make demo, the README's first command) relays its sample
// orders end to end on a private Postgres and kfake, written as outbox rows
// and as logical messages: every event it committed is read back from
// Kafka with its event id header, none of the rolled-back order's, and the
// relay stops cleanly.
func TestDemoRelaysSampleOrders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Postgres cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := demo(ctx, &stdout, &stderr); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	records := regexp.MustCompile(`(?m)^    topic=(outbox\.event\.(order|customer)) partition=\d+ offset=\d+ key=\S+ headers=\[id=[0-9a-f-]{36}\]$`).FindAllStringSubmatch(out, -1)
	if len(records) != 10 {
		t.Errorf("demo printed %d records with an id header, want 10:\n%s", len(records), out)
	}
	if !strings.Contains(out, "==> done: 10 events relayed;") {
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
}
