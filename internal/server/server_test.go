package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/slotmon"
)

// stubRelay answers readiness and status as the test says. It stands in
// for the relay, whose real behaviour internal/relay's integration tests cover.
type stubRelay struct {
	notReady error
	// standby and notStandbyReady are StandbyReady's answer.
	standby         string
	notStandbyReady error
	status          relay.Status
}

func (s stubRelay) Ready(context.Context) error { return s.notReady }
func (s stubRelay) StandbyReady(context.Context) (string, error) {
	return s.standby, s.notStandbyReady
}
func (s stubRelay) Status(context.Context) relay.Status { return s.status }

func serve(t *testing.T, r Relay) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "walrelay_test_total", Help: "test"})
	c.Add(3)
	reg.MustRegister(c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New("", reg, r, slog.New(slog.DiscardHandler)).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after shutdown", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestEndpoints(t *testing.T) {
	tests := []struct {
		name     string
		relay    stubRelay
		path     string
		wantCode int
		wantBody string
	}{
		{"healthz", stubRelay{}, "/healthz", 200, "ok"},
		{"ready", stubRelay{}, "/readyz", 200, "ready"},
		{"not ready says why", stubRelay{notReady: errors.New(`not streaming: slot "walrelay" is held by another process (pid 4242)`)}, "/readyz", 503, "pid 4242"},
		{"standby: /readyz is not ready", stubRelay{notReady: errors.New("held by another process"), standby: "standby: held"}, "/readyz", 503, "not ready: held by another process"},
		{"standby: standbyok=true is ready and says so", stubRelay{notReady: errors.New("held by another process"), standby: "standby: held (1s ago)"}, "/readyz?standbyok=true", 200, "ready: standby: held (1s ago)"},
		{"standbyok alone is true", stubRelay{notReady: errors.New("held"), standby: "standby: held"}, "/readyz?standbyok", 200, "ready: standby"},
		{"standbyok=false is /readyz", stubRelay{notReady: errors.New("held by another process"), standby: "standby: held"}, "/readyz?standbyok=false", 503, "not ready: held by another process"},
		{"standbyok: an unhealthy standby says why", stubRelay{notReady: errors.New("x"), notStandbyReady: errors.New("not streaming: connecting: refused")}, "/readyz?standbyok=true", 503, "not ready: not streaming: connecting: refused"},
		{"standbyok: the active is ready", stubRelay{}, "/readyz?standbyok=true", 200, "ready\n"},
		{"standbyok not a boolean", stubRelay{}, "/readyz?standbyok=yes", 400, `standbyok="yes": want true or false`},
		{"metrics from the given registry", stubRelay{}, "/metrics", 200, "walrelay_test_total 3"},
		{"status as JSON", stubRelay{status: relay.Status{Streaming: true, ConfirmedLSN: "0/16B3748"}}, "/status", 200, `"confirmed_lsn": "0/16B3748"`},
		{"unknown path", stubRelay{}, "/nope", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := serve(t, tt.relay)
			code, body := get(t, base+tt.path)
			if code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestStatusDecodes(t *testing.T) {
	want := relay.Status{Streaming: true, Ready: true, ConfirmedLSN: "0/1", InFlightRecords: 7, Slot: slotmon.Status{Slot: "walrelay", Active: true, ActivePID: 12}}
	_, body := get(t, serve(t, stubRelay{status: want})+"/status")
	var got relay.Status
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("decoding /status: %v", err)
	}
	if got.InFlightRecords != 7 || got.Slot.ActivePID != 12 || !got.Streaming {
		t.Errorf("decoded %+v", got)
	}
}

func TestRunFailsOnBadAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = New(ln.Addr().String(), prometheus.NewRegistry(), stubRelay{}, slog.New(slog.DiscardHandler)).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("Run on a taken port = %v, want an error naming http.listen", err)
	}
}

func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		var opts []Option
		want := http.StatusNotFound
		if enabled {
			opts, want = []Option{WithPprof()}, http.StatusOK
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- New("", prometheus.NewRegistry(), stubRelay{}, slog.New(slog.DiscardHandler), opts...).Serve(ctx, ln)
		}()
		code, _ := get(t, "http://"+ln.Addr().String()+"/debug/pprof/")
		cancel()
		<-done
		if code != want {
			t.Errorf("pprof enabled=%v: GET /debug/pprof/ = %d, want %d", enabled, code, want)
		}
	}
}
