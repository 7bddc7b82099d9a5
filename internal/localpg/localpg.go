// Package localpg runs a throwaway Postgres cluster from the Postgres
// installation on this machine, for tests, the bench harness and
// `make demo` (cmd/walrelay-demo).
//
// Start finds the server binaries (initdb, pg_ctl, postgres), runs initdb
// into a private directory with trust authentication for local and
// 127.0.0.1 connections (replication included), writes a configuration
// suitable for logical replication (wal_level=logical, many slots and
// walsenders, fsync off) and starts the server with pg_ctl. The bootstrap
// superuser is named by User; DSN returns a connection string for it.
//
// When the process runs as root the cluster runs as the `postgres` OS user
// (initdb refuses root): every directory the server touches is chowned to
// that user and every server command runs with its credentials.
//
// A small watchdog shell process, started with the cluster, shuts the server
// down (SIGQUIT, immediate shutdown) and removes the directory Start created
// if this process dies without calling Close, so crashed or timed-out test
// binaries do not leak servers.
//
// For HA tests, NewStandby makes a hot standby of a running cluster (an
// online base backup and a physical slot, without pg_basebackup), Promote
// promotes it and Kill ends a cluster as a crash does (SIGKILL of every
// server process).
//
// The package does not manage production databases, does not tune Postgres
// for performance, and does not install Postgres: when the binaries are
// missing Start returns an error wrapping ErrBinariesNotFound.
package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// User is the name of the superuser role created by initdb; DSN connects as
// this role without a password.
const User = "walrelay"

// Defaults for the server configuration. Options.Settings overrides any of
// them. listen_addresses, port and unix_socket_directories are set by Start.
var defaultSettings = map[string]string{
	"wal_level":             "logical",
	"max_replication_slots": "64",
	"max_wal_senders":       "64",
	"max_connections":       "200",
	"fsync":                 "off",
	"full_page_writes":      "off",
	"shared_buffers":        "128MB",
	"wal_sender_timeout":    "60s",
	"logging_collector":     "off",
}

const (
	// osUser owns the cluster when this process runs as root.
	osUser = "postgres"
	// startAttempts bounds retries when an automatically picked port was
	// taken by someone else between picking it and the server binding it.
	startAttempts = 3
	// pgCtlTimeout is passed to pg_ctl -t (seconds).
	pgCtlTimeout = "60"
	// closeTimeout bounds the shutdown done by Close.
	closeTimeout = 60 * time.Second
	// maxSocketPath is a conservative bound on a unix socket path length
	// (sun_path is 108 bytes on Linux, 104 on BSDs).
	maxSocketPath = 100
)

// Options configures Start. The zero value is usable.
type Options struct {
	// Dir is the parent directory for the data directory (Dir/data), the
	// unix socket (Dir/run) and the server log (Dir/postgres.log). Empty
	// means a new directory from os.MkdirTemp. Close removes Dir only if
	// Start created it. If Dir/data already holds a cluster it is reused
	// (no initdb), which lets the demo keep data between runs.
	Dir string
	// Port is the TCP port on 127.0.0.1. 0 picks a free port.
	Port int
	// BinDir is the directory holding initdb, pg_ctl and postgres. Empty
	// means: $WALRELAY_PG_BIN, then `pg_config --bindir`, then the newest
	// /usr/lib/postgresql/*/bin, then $PATH.
	BinDir string
	// Settings are extra postgresql.conf settings; they override the
	// defaults (wal_level=logical, max_replication_slots=64, ...).
	Settings map[string]string
	// Logger receives progress messages. Nil discards them.
	Logger *slog.Logger
}

// Cluster is a running (or stopped) throwaway Postgres cluster. Its methods
// are safe for concurrent use.
type Cluster struct {
	log      *slog.Logger
	binDir   string
	dir      string
	dataDir  string
	sockDir  string
	logFile  string
	port     int
	settings map[string]string
	removes  []string            // directories Close removes
	cred     *syscall.Credential // non-nil when server commands run as osUser

	mu       sync.Mutex
	running  bool
	closed   bool
	watchdog *exec.Cmd
}

// Start creates (or reuses) a cluster, starts it and returns once it accepts
// connections. On failure everything Start created is removed and the error
// includes the tail of the server log.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	binDir, err := findBinDir(ctx, opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("validating localpg options: Port %d out of range", opts.Port)
	}
	c := &Cluster{
		log:      logger.With("component", "localpg"),
		binDir:   binDir,
		settings: make(map[string]string),
	}
	for k, v := range defaultSettings {
		c.settings[k] = v
	}
	for k, v := range opts.Settings {
		c.settings[k] = v
	}
	defer func() {
		if err != nil {
			if cerr := c.Close(); cerr != nil {
				c.log.Warn("cleaning up after failed start", "err", cerr)
			}
		}
	}()

	if os.Geteuid() == 0 {
		cred, err := lookupCredential(osUser)
		if err != nil {
			return nil, fmt.Errorf("looking up OS user %q to run postgres as (initdb refuses root): %w", osUser, err)
		}
		c.cred = cred
	}
	if err := c.prepareDirs(opts.Dir); err != nil {
		return nil, err
	}

	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		c.log.Info("reusing existing cluster", "data_dir", c.dataDir)
	} else {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}

	c.startWatchdog()

	for attempt := 1; ; attempt++ {
		c.port = opts.Port
		if c.port == 0 {
			if c.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		if err = c.writeConfig(); err != nil {
			return nil, err
		}
		err = c.Restart(ctx)
		if err == nil || opts.Port != 0 || attempt == startAttempts || ctx.Err() != nil || !portTaken(c.port) {
			break
		}
		c.log.Warn("start failed, retrying on another port", "port", c.port, "err", err)
	}
	if err != nil {
		return nil, err
	}
	c.log.Info("postgres started", "port", c.port, "data_dir", c.dataDir, "bin_dir", c.binDir)
	return c, nil
}

// DSN returns a connection string for the superuser on database over TCP,
// without TLS. An empty database means "postgres".
func (c *Cluster) DSN(database string) string {
	return c.dsn(database, net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)), url.Values{"sslmode": {"disable"}})
}

// SocketDSN is DSN over the server's Unix-domain socket instead of TCP:
// what a client on the same machine can use to skip the TCP stack.
func (c *Cluster) SocketDSN(database string) string {
	return c.dsn(database, "", url.Values{"host": {c.sockDir}, "port": {strconv.Itoa(c.port)}})
}

// dsn is the superuser's URL for database at host (empty: in the query).
func (c *Cluster) dsn(database, host string, query url.Values) string {
	if database == "" {
		database = "postgres"
	}
	u := url.URL{Scheme: "postgres", User: url.User(User), Host: host, Path: "/" + database, RawQuery: query.Encode()}
	return u.String()
}

// Port returns the TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// BinDir returns the directory of the server binaries in use.
func (c *Cluster) BinDir() string { return c.binDir }

// DataDir returns the cluster's data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// Stop shuts the server down with `pg_ctl stop -m mode` (smart, fast or
// immediate) and waits for it to exit. Stopping a stopped cluster is a
// no-op. Restart starts it again.
func (c *Cluster) Stop(ctx context.Context, mode string) error {
	switch mode {
	case "smart", "fast", "immediate":
	default:
		return fmt.Errorf("stopping postgres with mode %q: %w", mode, ErrBadStopMode)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("stopping postgres: %w", ErrClosed)
	}
	return c.stopLocked(ctx, mode)
}

func (c *Cluster) stopLocked(ctx context.Context, mode string) error {
	if !c.running {
		return nil
	}
	out, err := c.run(ctx, "pg_ctl", "stop", "-w", "-t", pgCtlTimeout, "-m", mode, "-D", c.dataDir)
	if err != nil {
		return fmt.Errorf("stopping postgres (mode %s): %w: %s\nserver log:\n%s", mode, err, bytes.TrimSpace(out), c.LogTail(20))
	}
	c.running = false
	c.log.Info("postgres stopped", "mode", mode, "port", c.port)
	return nil
}

// Restart starts the server again with the same port and data. If it is
// running it is first stopped with mode fast. It returns once the server
// accepts connections.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("restarting postgres: %w", ErrClosed)
	}
	if err := c.stopLocked(ctx, "fast"); err != nil {
		return err
	}
	out, err := c.run(ctx, "pg_ctl", "start", "-w", "-t", pgCtlTimeout, "-D", c.dataDir, "-l", c.logFile)
	if err != nil {
		// pg_ctl may have launched a postmaster before failing or being
		// cancelled; make sure it is gone so the next attempt starts clean.
		c.killStray()
		return fmt.Errorf("starting postgres on port %d: %w: %s\nserver log:\n%s", c.port, err, bytes.TrimSpace(out), c.LogTail(30))
	}
	c.running = true
	if err := c.ping(ctx); err != nil {
		return fmt.Errorf("connecting to postgres on port %d after start: %w\nserver log:\n%s", c.port, err, c.LogTail(30))
	}
	return nil
}

// Close stops the server (mode fast, falling back to immediate) if it is
// running, stops the watchdog and removes the directory if Start created
// it. Calling Close more than once is safe.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	if c.running {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if err := c.stopLocked(ctx, "fast"); err != nil {
			c.log.Warn("fast shutdown failed, trying immediate", "err", err)
			if err := c.stopLocked(ctx, "immediate"); err != nil {
				errs = append(errs, err)
			}
		}
		cancel()
	}
	if c.watchdog != nil {
		// The watchdog is our own child; killing its process group (it is
		// its own leader) also ends any sleep it is waiting on.
		if err := syscall.Kill(-c.watchdog.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("stopping localpg watchdog: %w", err))
		}
		_ = c.watchdog.Wait() // reports the kill; nothing to act on
		c.watchdog = nil
	}
	if len(errs) == 0 { // never delete files under a server we failed to stop
		for _, d := range c.removes {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// LogTail returns the last n lines of the server log, or "" when there is
// no log yet.
func (c *Cluster) LogTail(n int) string { return TailFile(c.logFile, n) }

// ping connects once, proving the server accepts connections over TCP.
func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}
