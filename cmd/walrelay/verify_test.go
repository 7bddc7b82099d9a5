package main

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// verifyJSONOut is the part of verify's -o json the tests read.
type verifyJSONOut struct {
	Since, Until     time.Time
	Rows             int64
	Missing          []string `json:"missing"`
	Unconfirmed      []string `json:"unconfirmed"`
	Unknown          []string `json:"unknown"`
	Duplicates       []string `json:"duplicates"`
	MissingCount     int      `json:"missing_count"`
	UnconfirmedCount int      `json:"unconfirmed_count"`
	UnknownCount     int      `json:"unknown_count"`
	DuplicateCount   int      `json:"duplicate_count"`
	FenceConfirmed   bool     `json:"fence_confirmed"`
	Republished      *struct {
		Sent, Acknowledged int
		Failed             []string
	} `json:"republished"`
}

// TestVerifyCommand: walrelay run publishes (and keeps running, as in
// production); verify exits 0 with empty arrays; records deleted from a
// topic make it exit 1 listing exactly them, with nothing on stderr but
// progress; --republish exits 0 and the next verify is clean; bad flags
// exit 2. With the broker refusing produce, a row inserted just before
// verify is unconfirmed, not missing: exit 3 (not checked), a word on
// stderr, nothing republished; once the broker accepts, verify is clean and the event is
// on its topic once.
func TestVerifyCommand(t *testing.T) {
	e := newE2E(t)
	if e.broker.Cluster == nil {
		t.Fatal("needs the in-process kfake broker for fault injection")
	}
	e.setup(t, "created")
	ids := insertEvents(t, e.dsn, slices.Repeat([]string{"order", "customer"}, 30)...)
	relay := startChild(t, e.env, "run")
	recs := e.broker.ReadAll(t, e.topics(), len(ids), 60*time.Second)

	// The default window: the last hour up to 10s ago.
	before := time.Now()
	got := decodeJSON[verifyJSONOut](t, wantOK(t, e.env, "verify", "-o", "json"))
	after := time.Now()
	if got.Until.Before(before.Add(-10*time.Second)) || got.Until.After(after.Add(-10*time.Second)) || got.Until.Sub(got.Since) != time.Hour-10*time.Second {
		t.Errorf("default window %s..%s, want the last hour up to 10s before now (%s)", got.Since, got.Until, before)
	}

	raw := wantOK(t, e.env, "verify", "-o", "json", "--until", "0s")
	got = decodeJSON[verifyJSONOut](t, raw)
	for _, field := range []string{`"missing": []`, `"unknown": []`, `"duplicates": []`, `"since"`, `"until"`, `"missing_count": 0`} {
		if !strings.Contains(raw, field) {
			t.Errorf("healthy verify -o json lacks %s:\n%s", field, raw)
		}
	}
	if got.Rows != int64(len(ids)) || got.Until.Sub(got.Since) < 59*time.Minute {
		t.Errorf("healthy verify: rows %d window %s..%s, want %d rows over the last hour", got.Rows, got.Since, got.Until, len(ids))
	}

	var removed []string
	for _, r := range recs {
		if r.Topic == e.topics()[0] && r.Partition == 1 && r.Offset < 4 {
			removed = append(removed, testenv.Header(r, "id"))
		}
	}
	cut := kadm.Offsets{}
	cut.Add(kadm.Offset{Topic: e.topics()[0], Partition: 1, At: 4})
	if _, err := kadm.NewClient(e.broker.Client(t)).DeleteRecords(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	stdout, stderr, code := walrelay(t, e.env, "verify", "-o", "json", "--until", "0s")
	got = decodeJSON[verifyJSONOut](t, stdout)
	if code != 1 || !slices.Equal(got.Missing, removed) || got.MissingCount != len(removed) || len(removed) != 4 {
		t.Fatalf("verify after deleting records: exit %d, missing %v (count %d), want exit 1 and %v", code, got.Missing, got.MissingCount, removed)
	}
	if strings.TrimSpace(stderr) != "" {
		t.Errorf("verify reporting missing events wrote to stderr (want the report alone): %q", stderr)
	}
	stdout, _, code = walrelay(t, e.env, "verify", "--until", "0s")
	if code != 1 || !strings.Contains(stdout, "missing: 4\n") || !strings.Contains(stdout, removed[0]) || !strings.Contains(stdout, "FAIL") {
		t.Errorf("verify (table): exit %d\n%s", code, stdout)
	}

	stdout, _, code = walrelay(t, e.env, "verify", "--republish", "-o", "json", "--until", "0s")
	got = decodeJSON[verifyJSONOut](t, stdout)
	if code != 0 || got.Republished == nil || got.Republished.Acknowledged != len(removed) {
		t.Fatalf("verify --republish: exit %d, republished %+v, want exit 0 and %d acknowledged", code, got.Republished, len(removed))
	}
	got = decodeJSON[verifyJSONOut](t, wantOK(t, e.env, "verify", "-o", "json", "--until", "0s"))
	if len(got.Missing) != 0 {
		t.Errorf("verify after --republish: missing %v", got.Missing)
	}

	for _, args := range [][]string{
		{"verify", "--since", "yesterday"},
		{"verify", "--until", "-5m"},
		{"verify", "--since", "10m", "--until", "1h"},
		{"verify", "--margin", "-1s"},
		{"verify", "--wait", "-1s"},
		{"verify", "-o", "yaml"},
		{"verify", "extra"},
	} {
		stdout, stderr, code := walrelay(t, e.env, args...)
		wantFailure(t, stdout, stderr, code, 2)
	}
	rfc := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	got = decodeJSON[verifyJSONOut](t, wantOK(t, e.env, "verify", "-o", "json", "--since", rfc, "--until", "1s"))
	if got.Rows != int64(len(ids)) || got.Since.Format(time.RFC3339) != rfc {
		t.Errorf("verify --since %s: rows %d since %s", rfc, got.Rows, got.Since)
	}

	// The broker refuses produce: the relay cannot publish a new row, nor
	// the slot pass verify's fence.
	fault := e.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	late := insertEvents(t, e.dsn, "order")
	stdout, stderr, code = walrelay(t, e.env, "verify", "--republish", "-o", "json", "--until", "0s", "--wait", "2s")
	got = decodeJSON[verifyJSONOut](t, stdout)
	if code != 3 || len(got.Missing) != 0 || !slices.Equal(got.Unconfirmed, late) || got.UnconfirmedCount != 1 || got.FenceConfirmed {
		t.Fatalf("verify while the broker refuses: exit %d, missing %v, unconfirmed %v (count %d), fence confirmed %t; want exit 3, unconfirmed %v\n%s",
			code, got.Missing, got.Unconfirmed, got.UnconfirmedCount, got.FenceConfirmed, late, stderr)
	}
	if got.Republished == nil || got.Republished.Sent != 0 {
		t.Errorf("verify --republish while the broker refuses: republished %+v, want nothing sent", got.Republished)
	}
	if !strings.Contains(stderr, "did not confirm the fence") || !strings.Contains(stderr, "confirmed_flush_lsn") || !strings.Contains(stderr, "behind") {
		t.Errorf("verify while the slot is behind: stderr %q, want where the slot and the fence are and why", stderr)
	}
	fault.Remove()
	count := 0
	for _, r := range e.broker.ReadAll(t, e.topics(), len(ids)+1, 60*time.Second) { // the deleted ones replaced by the republished ones, and the late one
		if testenv.Header(r, "id") == late[0] {
			count++
		}
	}
	got = decodeJSON[verifyJSONOut](t, wantOK(t, e.env, "verify", "-o", "json", "--until", "0s"))
	if len(got.Missing)+len(got.Unconfirmed)+len(got.Duplicates) != 0 || !got.FenceConfirmed {
		t.Errorf("verify once the broker accepts: missing %v unconfirmed %v duplicates %v fence confirmed %t, want clean", got.Missing, got.Unconfirmed, got.Duplicates, got.FenceConfirmed)
	}
	ends, err := kadm.NewClient(e.broker.Client(t)).ListEndOffsets(t.Context(), e.topics()...)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if count != 1 || total != int64(len(ids)+len(removed)+1) {
		t.Errorf("event %s is on its topic %d times (%d records produced in all), want once (%d in all)", late[0], count, total, len(ids)+len(removed)+1)
	}
	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Errorf("walrelay run exited %d", code)
	}
}
