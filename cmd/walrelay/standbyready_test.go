package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/localpg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Two `walrelay run` on one slot, as the Helm chart's two replicas: the
// one streaming is ready on /readyz and on /readyz?standbyok=true; the
// other, waiting for the slot, is not ready on /readyz (its meaning is
// kept: the instance that streams) and ready on /readyz?standbyok=true (a
// healthy standby, the chart's readiness probe), and /status and walrelay
// status say which is which. A standby is ready only while it could take over:
//   - its attempts on the slot hang (the postmaster frozen with SIGSTOP:
//     a new connection gets no answer, while the active's walsender, a
//     process of its own, streams on): not ready once postgres.max_backoff
//     plus 10s passed since the last one ended, ready again after SIGCONT;
//   - no Kafka broker answers: not ready, ready again once one does;
//   - Postgres is stopped (immediate): not ready, saying why.
//
// In both delivery modes: with exactly-once the standby has built its
// transactional producer (and fenced no one: only a process holding the
// slot fences).
func TestReadyzStandbyOK(t *testing.T) {
	for _, delivery := range []string{"at_least_once", "exactly_once"} {
		t.Run(delivery, func(t *testing.T) { testReadyzStandbyOK(t, delivery) })
	}
}

func testReadyzStandbyOK(t *testing.T, delivery string) {
	pg := testenv.PrivateCluster(t, localpg.Options{})
	dsn := pg.DSN("postgres")
	setupOutbox(t, dsn)
	broker := testenv.Kafka(t)
	prefix := testenv.UniqueName(t, "sb")
	env := childEnv(
		"WALRELAY_POSTGRES_DSN="+dsn,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(broker.Addrs(), ","),
		"WALRELAY_POSTGRES_STATUS_INTERVAL=100ms",
		"WALRELAY_POSTGRES_MIN_BACKOFF=50ms",
		"WALRELAY_POSTGRES_MAX_BACKOFF=1s",
		"WALRELAY_RELAY_SHUTDOWN_TIMEOUT=5s",
		"WALRELAY_LOG_FORMAT=json",
		"WALRELAY_RELAY_DELIVERY="+delivery,
		"WALRELAY_ROUTER_ROUTE_TOPIC_REPLACEMENT="+prefix+".${routedByValue}",
	)
	activeAddr, standbyAddr := "127.0.0.1:"+closedPort(t), "127.0.0.1:"+closedPort(t)
	active := startChild(t, append(env, "WALRELAY_HTTP_LISTEN="+activeAddr), "run")
	waitHTTP(t, active, activeAddr, "/readyz", 30*time.Second)
	standby := startChild(t, append(env, "WALRELAY_HTTP_LISTEN="+standbyAddr), "run")
	waitHTTP(t, standby, standbyAddr, "/readyz?standbyok=true", 30*time.Second)

	want := func(addr, path string, code int, body string) {
		t.Helper()
		if c, b := httpGetStatus(t, addr, path); c != code || !strings.Contains(b, body) {
			t.Errorf("GET %s on %s = %d %q, want %d containing %q", path, addr, c, b, code, body)
		}
	}
	want(activeAddr, "/readyz", 200, "ready")
	want(activeAddr, "/readyz?standbyok=true", 200, "ready")
	want(standbyAddr, "/readyz", 503, "another process")
	want(standbyAddr, "/readyz?standbyok=true", 200, "ready: standby: replication slot is active in another process")
	for _, tc := range []struct {
		addr, role       string
		ready, standbyOK bool
	}{{activeAddr, "active", true, true}, {standbyAddr, "standby", false, true}} {
		var st struct {
			Role      string `json:"role"`
			Ready     bool   `json:"ready"`
			StandbyOK bool   `json:"ready_standbyok"`
		}
		if err := json.Unmarshal([]byte(httpGet(t, tc.addr, "/status")), &st); err != nil {
			t.Fatalf("/status: %v", err)
		}
		if st.Role != tc.role || st.Ready != tc.ready || st.StandbyOK != tc.standbyOK {
			t.Errorf("/status of the %s = role %q, ready %t, ready_standbyok %t; want %q, %t, %t", tc.role, st.Role, st.Ready, st.StandbyOK, tc.role, tc.ready, tc.standbyOK)
		}
	}

	// walrelay status says it too.
	out, stderr, code := walrelay(t, append(env, "WALRELAY_HTTP_LISTEN="+standbyAddr), "status")
	if code != 0 || !regexp.MustCompile(`(?m)^\s+role\s+standby \(healthy: /readyz\?standbyok=true answers 200\)$`).MatchString(out) {
		t.Errorf("walrelay status of the standby: exit %d, want a healthy standby's role line:\n%s%s", code, out, stderr)
	}

	// The standby's attempts hang.
	pid := postmasterPID(t, pg.DataDir())
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP of the postmaster: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	stopped := time.Now()
	body := waitReadyz(t, standbyAddr, "/readyz?standbyok=true", 503, 40*time.Second)
	t.Logf("standby %s after the postmaster's SIGSTOP: %s", time.Since(stopped).Round(time.Second), body)
	if !strings.Contains(body, "hangs") {
		t.Errorf("the standby's hung attempt reads %q, want it to say it hangs", body)
	}
	want(activeAddr, "/readyz", 200, "ready") // its walsender streams on
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT of the postmaster: %v", err)
	}
	waitReadyz(t, standbyAddr, "/readyz?standbyok=true", 200, 30*time.Second)

	// No Kafka broker answers (each request closes its connection, as a
	// broker that went away does): a standby that could not publish is not
	// ready either; then back.
	var kafkaDown atomic.Bool
	broker.Cluster.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		broker.Cluster.KeepControl()
		if kafkaDown.Load() {
			return nil, errors.New("broker unreachable (test)"), true
		}
		return nil, nil, false
	})
	kafkaDown.Store(true)
	body = waitReadyz(t, standbyAddr, "/readyz?standbyok=true", 503, 30*time.Second)
	t.Logf("standby with no Kafka broker answering: %s", body)
	if !strings.Contains(body, "standby: reaching kafka brokers") {
		t.Errorf("the standby without Kafka reads %q, want the failed ping", body)
	}
	kafkaDown.Store(false)
	waitReadyz(t, standbyAddr, "/readyz?standbyok=true", 200, 30*time.Second)

	// Postgres stopped.
	// Immediate: a fast shutdown waits for the active's walsender, which
	// waits for walrelay to confirm the shutdown checkpoint.
	if err := pg.Stop(t.Context(), "immediate"); err != nil {
		t.Fatal(err)
	}
	body = waitReadyz(t, standbyAddr, "/readyz?standbyok=true", 503, 30*time.Second)
	t.Logf("standby with Postgres stopped: %s", body)
	if !strings.Contains(body, "connecting") {
		t.Errorf("the standby with Postgres stopped reads %q, want the failed connection", body)
	}
	want(standbyAddr, "/readyz", 503, "connecting")
	waitReadyz(t, activeAddr, "/readyz?standbyok=true", 503, 30*time.Second)
	for _, c := range []*child{active, standby} {
		if c.exited() {
			t.Errorf("walrelay %v exited %d while Postgres was down", c.args, c.code)
		}
	}
	stopRelay(t, standby)
	stopRelay(t, active)
}

// waitReadyz waits until GET path on addr answers code, and returns the
// body.
func waitReadyz(t *testing.T, addr, path string, code int, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, b := httpGetStatus(t, addr, path)
		if c == code {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s on %s: still %d %q after %s, want %d", path, addr, c, b, timeout, code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postmasterPID reads the postmaster's pid from the data directory.
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		t.Fatalf("postmaster.pid holds %q", first)
	}
	return pid
}
