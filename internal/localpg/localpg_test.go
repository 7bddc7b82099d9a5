package localpg_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/localpg"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// start starts a cluster or fails the test; a missing installation is a
// failure, not a skip.
func start(t *testing.T, opts localpg.Options) *localpg.Cluster {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := localpg.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting local postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing cluster: %v", err)
		}
	})
	return c
}

func queryString(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("querying %q: %v", sql, err)
	}
	return s
}

func exec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("executing %q: %v", sql, err)
	}
}

func TestStartSettings(t *testing.T) {
	c := start(t, localpg.Options{Settings: map[string]string{"max_connections": "150"}})
	for _, tc := range []struct{ setting, want string }{
		{"wal_level", "logical"},
		{"max_replication_slots", "64"},
		{"max_wal_senders", "64"},
		{"max_connections", "150"}, // Settings override defaults
		{"fsync", "off"},
		{"synchronous_commit", "on"},
		{"listen_addresses", "127.0.0.1"},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			if got := queryString(t, c.DSN(""), "SHOW "+tc.setting); got != tc.want {
				t.Errorf("SHOW %s = %q, want %q", tc.setting, got, tc.want)
			}
		})
	}
	if got := queryString(t, c.DSN("postgres"), "SELECT current_user"); got != localpg.User {
		t.Errorf("current_user = %q, want %q", got, localpg.User)
	}
	if got := queryString(t, c.DSN("postgres"), "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user"); got != "true" {
		t.Errorf("DSN user is not a superuser (rolsuper = %s)", got)
	}
	if !strings.HasPrefix(c.DSN("x"), "postgres://walrelay@127.0.0.1:") {
		t.Errorf("DSN = %q", c.DSN("x"))
	}
	// inet_client_addr is NULL on a Unix-domain socket connection.
	for _, tc := range []struct{ dsn, want string }{{c.DSN(""), "tcp"}, {c.SocketDSN(""), "unix"}} {
		if got := queryString(t, tc.dsn, "SELECT CASE WHEN inet_client_addr() IS NULL THEN 'unix' ELSE 'tcp' END"); got != tc.want {
			t.Errorf("%s connects over %s, want %s", tc.dsn, got, tc.want)
		}
	}
	if got := queryString(t, c.SocketDSN("template1"), "SELECT current_database()"); got != "template1" {
		t.Errorf("SocketDSN(template1) connects to %q", got)
	}
}

func TestReplicationConnection(t *testing.T) {
	c := start(t, localpg.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("opening a replication connection (pg_hba must allow it): %v", err)
	}
	defer conn.Close(ctx)
	// IDENTIFY_SYSTEM only works on a replication connection.
	res := conn.PgConn().Exec(ctx, "IDENTIFY_SYSTEM")
	if _, err := res.ReadAll(); err != nil {
		t.Fatalf("IDENTIFY_SYSTEM: %v", err)
	}
}

func TestStopImmediateRestartKeepsData(t *testing.T) {
	c := start(t, localpg.Options{})
	exec(t, c.DSN(""), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before crash')")
	port := c.Port()

	ctx := t.Context()
	if err := c.Stop(ctx, "immediate"); err != nil {
		t.Fatalf("Stop(immediate): %v", err)
	}
	if err := c.Stop(ctx, "fast"); err != nil {
		t.Fatalf("Stop on a stopped cluster should be a no-op, got %v", err)
	}
	connCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if conn, err := pgx.Connect(connCtx, c.DSN("")); err == nil {
		conn.Close(connCtx)
		t.Fatal("connected to a stopped cluster")
	}
	cancel()

	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if c.Port() != port {
		t.Errorf("port changed across restart: %d -> %d", port, c.Port())
	}
	if got := queryString(t, c.DSN(""), "SELECT v FROM kept"); got != "before crash" {
		t.Errorf("after crash+restart, kept.v = %q", got)
	}
	// Restart of a running cluster stops it first.
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart while running: %v", err)
	}
	if got := queryString(t, c.DSN(""), "SELECT count(*)::text FROM kept"); got != "1" {
		t.Errorf("count = %s", got)
	}
	if !strings.Contains(c.LogTail(200), "database system is ready to accept connections") {
		t.Errorf("LogTail does not show the server log:\n%s", c.LogTail(200))
	}
}

func TestStopBadMode(t *testing.T) {
	c := start(t, localpg.Options{})
	if err := c.Stop(t.Context(), "gentle"); !errors.Is(err, localpg.ErrBadStopMode) {
		t.Fatalf("Stop(gentle) = %v, want ErrBadStopMode", err)
	}
}

func TestCloseRemovesCreatedDir(t *testing.T) {
	c := start(t, localpg.Options{})
	dir := filepath.Dir(c.DataDir())
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left %s behind (stat err %v)", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Restart(t.Context()); !errors.Is(err, localpg.ErrClosed) {
		t.Errorf("Restart after Close = %v, want ErrClosed", err)
	}
}

func TestDirAndPortOptionsReuse(t *testing.T) {
	parent, err := os.MkdirTemp("", "localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	// When run as root the server runs as "postgres", which must be able
	// to enter the parent.
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "cluster") // does not exist: Start creates it

	c := start(t, localpg.Options{Dir: dir})
	if want := filepath.Join(dir, "data"); c.DataDir() != want {
		t.Errorf("DataDir = %q, want %q", c.DataDir(), want)
	}
	exec(t, c.DSN(""), "CREATE TABLE kept (v int)")
	port := c.Port()
	if err := c.Stop(t.Context(), "fast"); err != nil {
		t.Fatal(err)
	}

	// A second Start on the same existing Dir reuses the data (no initdb)
	// and, since it did not create Dir, leaves it in place at Close.
	c2 := start(t, localpg.Options{Dir: dir, Port: port})
	if c2.Port() != port {
		t.Errorf("Port = %d, want %d", c2.Port(), port)
	}
	if got := queryString(t, c2.DSN(""), "SELECT count(*)::text FROM kept"); got != "0" {
		t.Errorf("reused cluster: count = %s", got)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Errorf("Close removed a Dir it did not create: %v", err)
	}
}

func TestBinariesNotFound(t *testing.T) {
	empty := t.TempDir()
	_, err := localpg.Start(t.Context(), localpg.Options{BinDir: empty, Logger: testLogger(t)})
	if !errors.Is(err, localpg.ErrBinariesNotFound) {
		t.Fatalf("Start with empty BinDir = %v, want ErrBinariesNotFound", err)
	}
	for _, want := range []string{empty, "apt-get install -y postgresql"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStartFailureIncludesLogTail(t *testing.T) {
	_, err := localpg.Start(t.Context(), localpg.Options{
		Settings: map[string]string{"shared_buffers": "not-a-size"},
		Logger:   testLogger(t),
	})
	if err == nil {
		t.Fatal("Start with a bad setting succeeded")
	}
	if !strings.Contains(err.Error(), "shared_buffers") {
		t.Errorf("error does not carry the server log naming the bad setting:\n%v", err)
	}
}

// TestWatchdogReapsAfterCrash runs a child test binary that starts a
// cluster and dies by SIGKILL without Close; the watchdog must stop the
// server and remove its directory.
func TestWatchdogReapsAfterCrash(t *testing.T) {
	if os.Getenv("LOCALPG_CRASH_HELPER") == "1" {
		c, err := localpg.Start(t.Context(), localpg.Options{})
		if err != nil {
			t.Fatalf("starting: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, _, _ := strings.Cut(string(b), "\n")
		os.Stdout.WriteString("CRASH_HELPER " + c.DataDir() + " " + pid + "\n")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	cmd := osexec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWatchdogReapsAfterCrash$", "-test.v")
	cmd.Env = append(os.Environ(), "LOCALPG_CRASH_HELPER=1")
	out, _ := cmd.CombinedOutput() // killed by design
	var dataDir string
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "CRASH_HELPER "); ok {
			f := strings.Fields(rest)
			dataDir = f[0]
			pid, _ = strconv.Atoi(f[1])
		}
	}
	if dataDir == "" || pid == 0 {
		t.Fatalf("helper did not start a cluster:\n%s", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, statErr := os.Stat(filepath.Dir(dataDir))
		if syscall.Kill(pid, 0) != nil && errors.Is(statErr, os.ErrNotExist) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGQUIT)
	t.Fatalf("after the owner died, postmaster %d or directory %s is still there", pid, dataDir)
}
