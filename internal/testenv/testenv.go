// Package testenv gives integration tests a Postgres server with logical
// replication and a Kafka-protocol broker, shared by the tests of one
// package.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := testenv.Postgres(t).NewDatabase(t) // fresh database, dropped at cleanup
//		kafka := testenv.Kafka(t, kfake.SeedTopics(1, "orders"))
//		...
//		recs := kafka.ReadAll(t, []string{"orders"}, 3, 10*time.Second)
//	}
//
// Postgres comes from, in order:
//   - WALRELAY_TEST_PG_DSN: an existing server (must have wal_level=logical);
//   - WALRELAY_TEST_BACKEND=docker: a postgres:15 container (testcontainers);
//   - otherwise a throwaway cluster from the local installation (localpg),
//     or, when WALRELAY_TEST_BACKEND is unset, the local binaries are
//     missing and a Docker engine answers, a container.
//
// The server starts on the first call to Postgres and is stopped by Main
// after the tests ran, so packages (or -run filters) whose tests never ask
// for it pay nothing. When it cannot start, every test that asks for it
// fails with the reason, and Main prints the reason again and exits
// non-zero: tests never pass vacuously.
//
// Kafka is an in-process kfake cluster per call, or the brokers in
// WALRELAY_TEST_KAFKA_BROKERS, or (WALRELAY_TEST_BACKEND=docker) one Kafka
// container per test package.
//
// WALRELAY_TEST_LOG=debug|info|warn sets the level of testenv's own log on
// stderr (default warn).
//
// Main and the package-level functions keep the per-test-binary state in one
// unexported variable; that is the one place this package departs from the
// no-globals rule, because TestMain offers no other place to put it.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/localpg"
)

// Environment variables read by this package.
const (
	// EnvPGDSN points the tests at an existing Postgres server.
	EnvPGDSN = "WALRELAY_TEST_PG_DSN"
	// EnvKafkaBrokers points the tests at existing Kafka brokers
	// (comma-separated host:port).
	EnvKafkaBrokers = "WALRELAY_TEST_KAFKA_BROKERS"
	// EnvBackend selects the backend: "" (local, docker fallback for
	// Postgres when the local binaries are missing), "local" (never
	// docker) or "docker" (containers for Postgres and Kafka).
	EnvBackend = "WALRELAY_TEST_BACKEND"
	// EnvLog sets the level of testenv's stderr log.
	EnvLog = "WALRELAY_TEST_LOG"
)

// Backend names reported by PG.Backend.
const (
	BackendLocal    = "local"
	BackendDocker   = "docker"
	BackendExternal = "external"
)

const (
	startTimeout   = 5 * time.Minute // docker may pull images
	cleanupTimeout = 30 * time.Second
)

// environment is the state of one test binary.
type environment struct {
	mu        sync.Mutex
	inMain    bool
	log       *slog.Logger
	pgStarted bool
	pg        *PG
	pgErr     error
	kafka     *kafkaContainer // docker backend only
	kafkaErr  error
	stops     []func() error // run by Main in reverse order
}

var env environment

// Main runs the tests of a package and exits with their code. Call it from
// TestMain. It stops the servers the tests started; if Postgres was needed
// and could not start, it says why on stderr and exits non-zero.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env.mu.Lock()
	env.inMain = true
	env.log = newLogger()
	env.mu.Unlock()

	code := m.Run()

	env.mu.Lock()
	defer env.mu.Unlock()
	if env.pgErr != nil {
		fmt.Fprintf(os.Stderr, "testenv: FAIL: postgres could not start: %v\n", env.pgErr)
		code = max(code, 1)
	}
	var errs []error
	for i := len(env.stops) - 1; i >= 0; i-- {
		errs = append(errs, env.stops[i]())
	}
	env.stops = nil
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: FAIL: stopping test servers: %v\n", err)
		code = max(code, 1)
	}
	return code
}

func newLogger() *slog.Logger {
	level := slog.LevelWarn
	if v := os.Getenv(EnvLog); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: ignoring %s=%q: %v\n", EnvLog, v, err)
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "testenv")
}

func backend() (string, error) {
	switch b := os.Getenv(EnvBackend); b {
	case "", BackendLocal, BackendDocker:
		return b, nil
	default:
		return "", fmt.Errorf("reading %s: unknown backend %q (want %q, %q or empty)", EnvBackend, b, BackendLocal, BackendDocker)
	}
}

// PG is the package's Postgres server.
type PG struct {
	adminDSN string
	cluster  *localpg.Cluster
	backend  string
}

// Postgres returns the package's server, starting it on first use. It fails
// the test if the server cannot start or if the package's TestMain does not
// call Main.
func Postgres(tb testing.TB) *PG {
	tb.Helper()
	pg, err := env.postgres()
	if err != nil {
		tb.Fatalf("testenv: postgres unavailable: %v", err)
	}
	return pg
}

func (e *environment) postgres() (*PG, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.inMain {
		return nil, errors.New("the test package has no TestMain calling testenv.Main; add: func TestMain(m *testing.M) { testenv.Main(m) }")
	}
	if !e.pgStarted {
		e.pgStarted = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		e.pg, e.pgErr = e.startPostgres(ctx)
		cancel()
	}
	return e.pg, e.pgErr
}

// startPostgres picks and starts the backend. e.mu is held.
func (e *environment) startPostgres(ctx context.Context) (*PG, error) {
	if dsn := os.Getenv(EnvPGDSN); dsn != "" {
		if err := checkServer(ctx, dsn); err != nil {
			return nil, fmt.Errorf("checking the server in %s: %w", EnvPGDSN, err)
		}
		e.log.Info("using external postgres", "env", EnvPGDSN)
		return &PG{adminDSN: dsn, backend: BackendExternal}, nil
	}
	b, err := backend()
	if err != nil {
		return nil, err
	}
	if b == BackendDocker {
		return e.startPostgresContainer(ctx)
	}
	c, err := localpg.Start(ctx, localpg.Options{Logger: e.log})
	if err != nil {
		if b == "" && errors.Is(err, localpg.ErrBinariesNotFound) {
			ok, why := DockerAvailable()
			if ok {
				e.log.Warn("local postgres binaries missing; using a docker container", "err", err)
				return e.startPostgresContainer(ctx)
			}
			return nil, fmt.Errorf("%w; no docker fallback either: %s", err, why)
		}
		return nil, err
	}
	e.stops = append(e.stops, c.Close)
	return &PG{adminDSN: c.DSN("postgres"), cluster: c, backend: BackendLocal}, nil
}

// checkServer connects and verifies the server can do logical replication.
func checkServer(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("reading wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("server has wal_level=%s; walrelay tests need wal_level=logical", level)
	}
	return nil
}

// Cluster returns the local cluster, or nil when the server is external or
// a container. Tests that stop or restart the server should use
// RequireCluster, or better a PrivateCluster so they do not disturb the
// package's other tests.
func (p *PG) Cluster() *localpg.Cluster { return p.cluster }

// RequireCluster returns the local cluster or skips the test, saying why.
func (p *PG) RequireCluster(tb testing.TB) *localpg.Cluster {
	tb.Helper()
	if p.cluster == nil {
		tb.Skipf("test needs a local postgres cluster it can stop and restart; the %s backend has none", p.backend)
	}
	return p.cluster
}

// Backend says where the server comes from: BackendLocal, BackendDocker or
// BackendExternal.
func (p *PG) Backend() string { return p.backend }

// AdminDSN returns a superuser connection string for the server's
// maintenance database.
func (p *PG) AdminDSN() string { return p.adminDSN }

// NewDatabase creates a fresh, uniquely named database for this test and
// returns a DSN for it. At cleanup it terminates the database's backends
// (walsenders included), drops its replication slots and drops it.
func (p *PG) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := UniqueName(tb, "t")
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.adminDSN)
	if err != nil {
		tb.Fatalf("testenv: connecting to create database %s: %v", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("testenv: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := p.dropDatabase(name); err != nil {
			tb.Errorf("testenv: dropping database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(p.adminDSN, name)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return dsn
}

// dropDatabase retries because a terminated walsender may hold its slot
// for a moment after pg_terminate_backend returns.
func (p *PG) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.adminDSN)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var last error
	for {
		last = dropOnce(ctx, conn, name)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func dropOnce(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
		return fmt.Errorf("terminating backends: %w", err)
	}
	// Terminated walsenders release their slots asynchronously; skip
	// still-active ones and come back.
	var active int
	if err := conn.QueryRow(ctx,
		"SELECT count(*) FROM pg_replication_slots WHERE database = $1 AND active", name).Scan(&active); err != nil {
		return fmt.Errorf("listing replication slots: %w", err)
	}
	if _, err := conn.Exec(ctx,
		"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active", name); err != nil {
		return fmt.Errorf("dropping replication slots: %w", err)
	}
	if active > 0 {
		return fmt.Errorf("%d replication slots still active", active)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping: %w", err)
	}
	return nil
}

// PrivateCluster starts a local cluster for this test alone, closed at
// cleanup: for tests that stop, crash or restart Postgres without
// disturbing the package's other tests. It skips the test when the backend
// is docker or external (no local binaries are expected then) and fails it
// if the cluster cannot start.
func PrivateCluster(tb testing.TB, opts localpg.Options) *localpg.Cluster {
	tb.Helper()
	b, err := backend()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	if b == BackendDocker || os.Getenv(EnvPGDSN) != "" {
		tb.Skipf("test needs a private local postgres cluster; skipped with %s=%q %s set=%t", EnvBackend, b, EnvPGDSN, os.Getenv(EnvPGDSN) != "")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(tb.Context(), startTimeout)
	defer cancel()
	c, err := localpg.Start(ctx, opts)
	if err != nil {
		if b == "" && errors.Is(err, localpg.ErrBinariesNotFound) {
			if ok, _ := DockerAvailable(); ok {
				tb.Skipf("test needs a private local postgres cluster; the local binaries are missing and the package uses docker: %v", err)
			}
		}
		tb.Fatalf("testenv: starting private postgres cluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("testenv: closing private postgres cluster: %v", err)
		}
	})
	return c
}

// UniqueName returns a lower-case identifier (at most 63 bytes, valid for
// Postgres databases, slots and Kafka topics) built from prefix, the test's
// name and a random suffix, so concurrent test binaries sharing a server
// do not collide.
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(prefix + "_" + tb.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && s[len(s)-1] != '_' {
				b.WriteByte('_')
			}
		}
	}
	base := strings.TrimRight(b.String(), "_")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "_")
	}
	return fmt.Sprintf("%s_%08x", base, rand.Uint32())
}

// withDatabase returns dsn with its database replaced, for URL and
// keyword/value DSNs.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing admin DSN: %w", redactURLError(err))
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form a later keyword overrides an earlier one.
	return dsn + " dbname=" + db, nil
}

// redactURLError drops the URL (which may hold a password) from a
// url.Parse error.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Connect opens a connection closed at the test's cleanup; it fails the
// test on error.
func Connect(tb testing.TB, dsn string) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("testenv: connecting: %v", err)
	}
	tb.Cleanup(func() { _ = conn.Close(context.Background()) }) // best effort; server may be gone
	return conn
}

// Exec runs sql on a short-lived connection to dsn and fails the test on
// error. Without args, sql may hold several statements.
func Exec(tb testing.TB, dsn, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("testenv: connecting: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("testenv: executing %q: %v", sql, err)
	}
}

// QueryValue runs a query returning one row with one column on a
// short-lived connection to dsn and returns the value; it fails the test on
// error (no rows included).
func QueryValue[T any](tb testing.TB, dsn, sql string, args ...any) T {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("testenv: connecting: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v T
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		tb.Fatalf("testenv: querying %q: %v", sql, err)
	}
	return v
}

// HoldSlot streams from slot on a replication connection of its own, with
// pgoutput's pluginArgs, as another walrelay process would, until the
// returned connection is closed (at cleanup at the latest): the slot is
// active, held by that connection's walsender.
func HoldSlot(tb testing.TB, dsn, slot string, pluginArgs ...string) *pgconn.PgConn {
	tb.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("testenv: connecting for replication: %v", err)
	}
	tb.Cleanup(func() { _ = conn.Close(context.Background()) })
	if err := pglogrepl.StartReplication(tb.Context(), conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: pluginArgs}); err != nil {
		tb.Fatalf("testenv: holding slot %s: %v", slot, err)
	}
	return conn
}
