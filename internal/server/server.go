// Package server is walrelay's HTTP listener: /metrics (Prometheus, from
// walrelay's own registry), /healthz (the process is alive), /readyz
// (streaming from the slot and a broker answers; the body says why not;
// /readyz?standbyok=true: that, or a healthy standby) and /status (the
// relay's and the slot's state as JSON, for `walrelay status`), and, when
// enabled, Go's profiler under /debug/pprof/.
//
// In: an address, a prometheus.Gatherer and a Relay to ask. Out: HTTP
// responses. It binds loopback by default (config http.listen) and never
// puts a secret in a response: reasons and status come from errors that
// are already redacted.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walrelay/walrelay/internal/relay"
)

// Relay is what the server asks about the relay.
type Relay interface {
	Ready(ctx context.Context) error
	// StandbyReady is Ready that also accepts a healthy standby: it
	// returns a description of the standby when it is one.
	StandbyReady(ctx context.Context) (standby string, err error)
	Status(ctx context.Context) relay.Status
}

// Server serves the endpoints. Create it with New and run it with Run.
type Server struct {
	addr string
	srv  *http.Server
	log  *slog.Logger
}

// Option configures a Server.
type Option func(*http.ServeMux)

// WithPprof serves Go's profiler under /debug/pprof/.
func WithPprof() Option {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
}

// New builds the server; it does not listen yet.
func New(addr string, g prometheus.Gatherer, r Relay, log *slog.Logger, opts ...Option) *Server {
	mux := http.NewServeMux()
	for _, o := range opts {
		o(mux)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		acceptStandby, err := standbyOK(req)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintln(w, err)
			return
		}
		var standby string
		if acceptStandby {
			standby, err = r.StandbyReady(req.Context())
		} else {
			err = r.Ready(req.Context())
		}
		switch {
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", err)
		case standby != "":
			fmt.Fprintln(w, "ready:", standby)
		default:
			fmt.Fprintln(w, "ready")
		}
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r.Status(req.Context()))
	})
	return &Server{
		addr: addr,
		log:  log,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
	}
}

// standbyOK reads /readyz's standbyok parameter: absent is false, present
// without a value is true, else a boolean (strconv.ParseBool). /readyz
// alone keeps its meaning, the instance that streams, which external
// monitors and the operators' scripts rely on; a Kubernetes readiness
// probe of a Deployment with a standby asks /readyz?standbyok=true, as
// Vault's health endpoint (/v1/sys/health?standbyok=true) is asked by its
// Helm chart: a parameter of the same endpoint, the same body. A value
// that is not a boolean is refused (400) rather than read as false, which
// would keep every standby unready with nothing saying why.
func standbyOK(req *http.Request) (bool, error) {
	q := req.URL.Query()
	if !q.Has("standbyok") {
		return false, nil
	}
	v := q.Get("standbyok")
	if v == "" {
		return true, nil
	}
	ok, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("standbyok=%q: want true or false", v)
	}
	return ok, nil
}

// Run listens and serves until ctx is done, then shuts down gracefully.
// It returns an error only if it cannot listen or serving fails.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening on http.listen %q: %w", s.addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.log.Info("serving /metrics, /healthz, /readyz, /status", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(shutdownCtx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
