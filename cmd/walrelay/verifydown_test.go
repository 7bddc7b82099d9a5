package main

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With the relay down, verify cannot tell a row not on its topic from one
// still in the slot: it says which rows it could not check and why, and
// exits 3 (not 0 with "ok: nothing missing"); rows that are on their
// topics are checked all the same, and once the relay runs again the same
// verify is clean and exits 0.
func TestVerifyRelayDown(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	published := insertEvents(t, e.dsn, "order", "customer")
	relay := startChild(t, e.env, "run")
	e.broker.ReadAll(t, e.topics(), len(published), 60*time.Second)
	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("walrelay run exited %d", code)
	}

	// The relay is down: these stay in the slot.
	pending := insertEvents(t, e.dsn, "order", "customer", "order")
	slices.Sort(pending)
	stdout, stderr, code := walrelay(t, e.env, "verify", "--until", "0s", "--wait", "1s")
	if code != 3 {
		t.Errorf("verify with the relay down: exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	wantLine := "NOT CHECKED: 3 rows not on their topics may be missing or still in flight: slot walrelay did not confirm the fence (is walrelay run streaming? walrelay status); run verify again once it does\n"
	if !strings.HasSuffix(stdout, wantLine) || strings.Contains(stdout, "ok: nothing missing") || !strings.Contains(stdout, "unconfirmed: 3 (not checked: ") {
		t.Errorf("verify with the relay down printed:\n%s\nwant the unconfirmed rows and a last line\n%s", stdout, wantLine)
	}
	if strings.Contains(stderr, "walrelay: ") {
		t.Errorf("the report is on stdout; stderr has an error line too:\n%s", stderr)
	}
	stdout, _, code = walrelay(t, e.env, "verify", "--until", "0s", "--wait", "1s", "-o", "json")
	got := decodeJSON[struct {
		Unconfirmed     []string `json:"unconfirmed"`
		NotCheckedCount int      `json:"not_checked_count"`
		MissingCount    int      `json:"missing_count"`
		FenceConfirmed  bool     `json:"fence_confirmed"`
	}](t, stdout)
	if code != 3 || got.NotCheckedCount != 3 || !slices.Equal(got.Unconfirmed, pending) || got.MissingCount != 0 || got.FenceConfirmed {
		t.Errorf("verify -o json with the relay down: exit %d, %+v; want exit 3, not_checked_count 3, unconfirmed %v", code, got, pending)
	}

	relay = startChild(t, e.env, "run")
	e.broker.ReadAll(t, e.topics(), len(published)+len(pending), 60*time.Second)
	stdout = wantOK(t, e.env, "verify", "--until", "0s")
	if !strings.HasSuffix(stdout, "ok: nothing missing\n") {
		t.Errorf("verify with the relay running again:\n%s", stdout)
	}
	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Errorf("walrelay run exited %d", code)
	}
}
