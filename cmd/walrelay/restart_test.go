package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay run with exactly-once delivery starts its pipeline again
// in-process when a Kafka commit's outcome is unknown (here the broker
// refuses the commit with UNKNOWN_SERVER_ERROR): the process keeps
// running; /healthz, /readyz, /status and /metrics keep answering, from
// the pipeline running now (the metrics registry is the same: no
// duplicate registration, the Kafka client metrics of the closed client
// gave way to the new one's); no walrelay goroutine is left behind by the
// stopped pipeline; every row reaches a read_committed consumer once; and
// SIGTERM still stops it cleanly.
func TestRunStartsAgainInProcessAfterAnUnknownCommit(t *testing.T) {
	e := newE2E(t)
	e.setup(t, "created")
	listen := "127.0.0.1:" + closedPort(t)
	c := startChild(t, append(e.env, "WALRELAY_RELAY_DELIVERY=exactly_once", "WALRELAY_HTTP_LISTEN="+listen, "WALRELAY_HTTP_PPROF=true"), "run")
	waitHTTP(t, c, listen, "/readyz", 30*time.Second)
	rows := 0
	insert := func() {
		t.Helper()
		rows++
		testenv.Exec(t, e.dsn, fmt.Sprintf(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-%d', 'T', '{}')`, rows))
		_, target := e.slot(t)
		e.waitConfirmed(t, target, 60*time.Second)
	}
	insert()
	base := walrelayGoroutines(t, listen)
	for restart := 1; restart <= 2; restart++ {
		refuse := e.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError,
			When: func(req kmsg.Request) bool { return req.(*kmsg.EndTxnRequest).Commit }})
		insert()
		if refuse.Hits() != 1 {
			t.Fatalf("restart %d: the commit was refused %d times, want 1", restart, refuse.Hits())
		}
		if c.exited() {
			t.Fatalf("walrelay exited %d after an unknown commit:\n%s", c.code, c.stderr.String())
		}
		waitHTTP(t, c, listen, "/readyz", 30*time.Second)
		waitHTTP(t, c, listen, "/healthz", time.Second)
		if got := metricValue(t, listen, `walrelay_kafka_transactions_total{result="unknown"}`); got != float64(restart) {
			t.Errorf("restart %d: kafka_transactions_total{unknown} = %v", restart, got)
		}
		if got := metricValue(t, listen, "walrelay_slot_held"+`{slot="walrelay"}`); got != 1 {
			t.Errorf("restart %d: slot_held = %v, want 1 (the pipeline running now)", restart, got)
		}
		var st struct {
			Streaming bool    `json:"streaming"`
			Ready     bool    `json:"ready"`
			Delivery  string  `json:"delivery"`
			Committed *uint64 `json:"kafka_transactions_committed"`
		}
		if err := json.Unmarshal([]byte(httpGet(t, listen, "/status")), &st); err != nil {
			t.Fatalf("/status: %v", err)
		}
		if !st.Streaming || !st.Ready || st.Delivery != "exactly_once" || st.Committed == nil || *st.Committed < uint64(restart+1) {
			t.Errorf("restart %d: /status = %+v, want streaming and ready, with the commits of every pipeline", restart, st)
		}
		// The stopped pipeline's goroutines are gone.
		deadline := time.Now().Add(10 * time.Second)
		for n := walrelayGoroutines(t, listen); n > base; n = walrelayGoroutines(t, listen) {
			if time.Now().After(deadline) {
				t.Fatalf("restart %d: %d walrelay goroutines, %d before the first restart:\n%s", restart, n, base, httpGet(t, listen, "/debug/pprof/goroutine?debug=1"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !strings.Contains(c.stderr.String(), "restarting the exactly-once pipeline in-process") {
		t.Errorf("no restart logged:\n%s", c.stderr.String())
	}
	recs := e.broker.As(kgo.FetchIsolationLevel(kgo.ReadCommitted())).ReadAll(t, e.topics()[:1], rows, 30*time.Second)
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.Key)]++
	}
	for i := 1; i <= rows; i++ {
		if n := seen[fmt.Sprint("o-", i)]; n != 1 {
			t.Errorf("row o-%d read %d times by a read_committed consumer, want once", i, n)
		}
	}
	stopRelay(t, c)
}

// waitHTTP waits until GET path on listen answers 200.
func waitHTTP(t *testing.T, c *child, listen, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + listen + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if c.exited() || time.Now().After(deadline) {
			t.Fatalf("GET %s: no 200 within %s (last: %v; exited=%t):\n%s", path, timeout, err, c.exited(), c.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpGet returns the body of GET path on listen.
func httpGet(t *testing.T, listen, path string) string {
	t.Helper()
	_, body := httpGetStatus(t, listen, path)
	return body
}

// httpGetStatus returns the status code and body of GET path on listen.
func httpGetStatus(t *testing.T, listen, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + listen + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// walrelayGoroutines counts the process's goroutines with a frame of
// walrelay's own code (Go's profiler, debug=2: one block per goroutine).
func walrelayGoroutines(t *testing.T, listen string) int {
	t.Helper()
	n := 0
	for _, g := range strings.Split(httpGet(t, listen, "/debug/pprof/goroutine?debug=2"), "\n\n") {
		if strings.Contains(g, "github.com/walrelay/walrelay/") && !strings.Contains(g, "net/http/pprof.") {
			n++
		}
	}
	return n
}
