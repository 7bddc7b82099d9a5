package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

type statusResult struct {
	RelayURL   string `json:"relay_url"`
	RelayError string `json:"relay_error"`
	Relay      *struct {
		Streaming           bool       `json:"streaming"`
		ConfirmedLSN        string     `json:"confirmed_lsn"`
		OldestUnpublished   float64    `json:"oldest_unpublished_event_age_seconds"`
		OldestUnpublishedAt *time.Time `json:"oldest_unpublished_commit_time"`
	} `json:"relay"`
	Slot *struct {
		Name      string `json:"name"`
		Active    bool   `json:"active"`
		ActivePID int32  `json:"active_pid"`
	} `json:"slot"`
	SlotError string `json:"slot_error"`
}

// `walrelay status` shows the running relay's /status and the slot from
// Postgres; --watch redraws until Ctrl-C; with the relay gone it says so,
// still shows the slot, and exits 1 (so scripts can tell), while --watch
// keeps redrawing; with both gone it fails.
func TestStatus(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	broker := testenv.Kafka(t)
	listen := "127.0.0.1:" + closedPort(t)
	env := childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","), "WALRELAY_HTTP_LISTEN="+listen)

	relay := startChild(t, env, "run")
	var st statusResult
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Exit 1 until the relay answers.
		stdout, stderr, code := walrelay(t, env, "status", "-o", "json")
		if code != 0 && code != 1 {
			t.Fatalf("status exited %d:\n%s", code, stderr)
		}
		st = decodeJSON[statusResult](t, stdout)
		if st.Relay != nil && st.Relay.Streaming && st.Slot != nil && st.Slot.Active {
			if code != 0 || stderr != "" {
				t.Fatalf("status with the relay streaming exited %d: %s", code, stderr)
			}
			break
		}
		if time.Now().After(deadline) || relay.exited() {
			t.Fatalf("status never showed a streaming relay and an active slot: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.RelayURL != "http://"+listen+"/status" || st.Slot.Name != "walrelay" || st.Slot.ActivePID == 0 {
		t.Errorf("status -o json = %+v", st)
	}
	out := wantOK(t, env, "status")
	for _, want := range []string{"relay", "http://" + listen + "/status", "streaming", "yes", "slot walrelay (from postgres)", "confirmed_flush_lsn", "active", "pid"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// The oldest unpublished event: none while idle; while the broker
	// refuses produce, the refused event's age and commit time.
	if st.Relay.OldestUnpublishedAt != nil || !regexp.MustCompile(`(?m)^\s+oldest unpublished\s+none$`).MatchString(out) {
		t.Errorf("status of an idle relay shows an unpublished event (%v):\n%s", st.Relay.OldestUnpublishedAt, out)
	}
	t.Run("unpublished event", func(t *testing.T) {
		if broker.Cluster == nil {
			t.Skip("needs kfake for fault injection")
		}
		fault := broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
		defer fault.Remove()
		testenv.Exec(t, dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'refused', 'T', '{}')`)
		aged := regexp.MustCompile(`(?m)^\s+oldest unpublished\s+([0-9.]+)s \(committed \d{4}-\d\d-\d\dT[0-9:.]+Z\)$`)
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, _, _ := walrelay(t, env, "status")
			if m := aged.FindStringSubmatch(out); m != nil {
				if age, err := strconv.ParseFloat(m[1], 64); err == nil && age >= 1 {
					break
				}
			}
			if time.Now().After(deadline) || relay.exited() {
				t.Fatalf("status never showed an event unpublished for a second while the broker refuses:\n%s", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		js := decodeJSON[statusResult](t, wantOK(t, env, "status", "-o", "json"))
		if js.Relay == nil || js.Relay.OldestUnpublished < 1 || js.Relay.OldestUnpublishedAt == nil {
			t.Errorf("status -o json while the broker refuses: %+v", js.Relay)
		}
		fault.Remove()
		deadline = time.Now().Add(30 * time.Second)
		for {
			out, _, _ := walrelay(t, env, "status")
			if regexp.MustCompile(`(?m)^\s+oldest unpublished\s+none$`).MatchString(out) {
				break
			}
			if time.Now().After(deadline) || relay.exited() {
				t.Fatalf("status never showed nothing unpublished once the broker accepts:\n%s", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("watch", func(t *testing.T) {
		w := startChild(t, env, "status", "--watch", "--interval", "200ms")
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(w.stdout.String(), "\033[H\033[2J") < 2 {
			if time.Now().After(deadline) || w.exited() {
				t.Fatalf("status --watch did not redraw twice:\n%q", w.stdout.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		w.signal(t, syscall.SIGINT)
		if code := w.wait(t, 10*time.Second); code != 0 {
			t.Errorf("status --watch exited %d on SIGINT, want 0", code)
		}
	})

	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("relay exited %d", code)
	}
	t.Run("exactly once", func(t *testing.T) {
		eos := append(slices.Clone(env), "WALRELAY_RELAY_DELIVERY=exactly_once")
		relay := startChild(t, eos, "run")
		testenv.Exec(t, dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'T', '{}')`)
		re := regexp.MustCompile(`(?m)^\s+kafka transactions\s+[1-9]\d* committed, 0 aborted$`)
		// The id walrelay run derives: walrelay-<database>-<slot>-<system_identifier>.
		txnID := regexp.MustCompile(`(?m)^\s+transactional_id\s+` + regexp.QuoteMeta("walrelay-"+testenv.QueryValue[string](t, dsn, "SELECT current_database()")+"-walrelay-"+
			testenv.QueryValue[string](t, dsn, "SELECT system_identifier::text FROM pg_control_system()")) + `$`)
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, _, _ := walrelay(t, eos, "status")
			if re.MatchString(out) && regexp.MustCompile(`(?m)^\s+delivery\s+exactly_once$`).MatchString(out) && regexp.MustCompile(`(?m)^\s+checkpoint_lsn\s+[0-9A-F]+/[0-9A-F]+$`).MatchString(out) && txnID.MatchString(out) {
				break
			}
			if time.Now().After(deadline) || relay.exited() {
				t.Fatalf("status never showed exactly-once delivery with a committed kafka transaction:\n%s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		relay.signal(t, syscall.SIGTERM)
		if code := relay.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("relay exited %d", code)
		}
	})
	t.Run("relay unreachable", func(t *testing.T) {
		out, stderr, code := walrelay(t, env, "status")
		wantFailure(t, out, stderr, code, 1, "the relay could not be read", "relay not reachable at http://"+listen+"/status")
		for _, want := range []string{"unreachable", "relay not reachable at http://" + listen + "/status", "is `walrelay run` running", "slot walrelay (from postgres)"} {
			if !strings.Contains(out, want) {
				t.Errorf("status with the relay stopped lacks %q:\n%s", want, out)
			}
		}
		if !regexp.MustCompile(`(?m)^\s+active\s+no$`).MatchString(out) {
			t.Errorf("status should show the slot inactive:\n%s", out)
		}
	})
	t.Run("relay unreachable json", func(t *testing.T) {
		out, stderr, code := walrelay(t, env, "status", "-o", "json")
		wantFailure(t, out, stderr, code, 1, "the relay could not be read")
		st := decodeJSON[statusResult](t, out)
		if st.Relay != nil || !strings.Contains(st.RelayError, "relay not reachable") || st.Slot == nil || st.Slot.Name != "walrelay" || st.Slot.Active {
			t.Errorf("status -o json with the relay stopped = %+v", st)
		}
	})
	t.Run("watch keeps redrawing with the relay unreachable", func(t *testing.T) {
		w := startChild(t, env, "status", "--watch", "--interval", "200ms")
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(w.stdout.String(), "\033[H\033[2J") < 2 {
			if time.Now().After(deadline) || w.exited() {
				t.Fatalf("status --watch did not redraw twice (exited %t):\n%q", w.exited(), w.stdout.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(w.stdout.String(), "unreachable") {
			t.Errorf("status --watch does not show the relay unreachable:\n%s", w.stdout.String())
		}
		w.signal(t, syscall.SIGINT)
		if code := w.wait(t, 10*time.Second); code != 0 || w.stderr.String() != "" {
			t.Errorf("status --watch exited %d on SIGINT, want 0; stderr: %s", code, w.stderr.String())
		}
	})
	t.Run("http.listen empty", func(t *testing.T) {
		out, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_HTTP_LISTEN="), "status")
		wantFailure(t, out, stderr, code, 1, "the relay could not be read", "http.listen is empty")
		if !strings.Contains(out, "slot walrelay (from postgres)") || !strings.Contains(out, "confirmed_flush_lsn") {
			t.Errorf("status should still show the slot:\n%s", out)
		}
	})
	t.Run("slot missing", func(t *testing.T) {
		relay := startChild(t, env, "run")
		waitStreaming(t, relay, dsn)
		out, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+dsn, "WALRELAY_HTTP_LISTEN="+listen, "WALRELAY_POSTGRES_SLOT=nope"), "status")
		wantFailure(t, out, stderr, code, 1, "the slot could not be read from postgres", `"nope"`)
		if !strings.Contains(out, "streaming") {
			t.Errorf("status should still show the relay:\n%s", out)
		}
		stopRelay(t, relay)
	})

	stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+withPassword(t, dsn, "pw", closedPort(t)), "WALRELAY_HTTP_LISTEN="+listen), "status")
	wantFailure(t, stdout, stderr, code, 1, "neither the relay", "nor postgres could be read")
	if !strings.Contains(stdout, "cannot reach postgres at 127.0.0.1:") {
		t.Errorf("status should say why the slot is unavailable:\n%s", stdout)
	}
}
