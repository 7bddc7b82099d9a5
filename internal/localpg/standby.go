package localpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file makes a hot standby of a running cluster, promotes it, and
// kills a cluster the way a crash does: what HA tests (failover, decoding
// from a standby, slot synchronization) need, with only the server
// binaries (initdb, pg_ctl, postgres) that every supported major ships, so
// no pg_basebackup.

// StandbyOptions configures NewStandby. The zero value is usable.
type StandbyOptions struct {
	// Dir is the parent directory of the standby, as Options.Dir. Empty
	// means a new temporary directory.
	Dir string
	// Slot is the physical replication slot on the primary the standby
	// streams from (primary_slot_name), created by NewStandby. Empty means
	// "standby_<port>" with the standby's port.
	Slot string
	// Settings are extra postgresql.conf settings of the standby (e.g.
	// sync_replication_slots=on), over the primary's and the standby
	// defaults (hot_standby=on, hot_standby_feedback=on, primary_conninfo
	// with dbname=postgres, primary_slot_name).
	Settings map[string]string
}

// NewStandby makes a hot standby of c, which must be running: it creates
// a physical slot on c (reserving WAL at once), takes an online base
// backup with the low-level backup API (pg_backup_start / pg_backup_stop,
// or pg_start_backup / pg_stop_backup before Postgres 15) by copying the
// data directory (without pg_wal, pg_replslot and the server's pid files;
// the standby streams the WAL it needs through the slot), writes the
// backup label, standby.signal and the standby's settings, and starts it.
// It returns once the standby accepts connections (consistent). The
// standby runs the same binaries as c. Close it like any cluster.
func (c *Cluster) NewStandby(ctx context.Context, opts StandbyOptions) (_ *Cluster, err error) {
	c.mu.Lock()
	running := c.running && !c.closed
	c.mu.Unlock()
	if !running {
		return nil, fmt.Errorf("making a standby: the primary on port %d is not running", c.port)
	}
	s := &Cluster{log: c.log.With("standby_of", c.port), binDir: c.binDir, cred: c.cred, settings: make(map[string]string)}
	defer func() {
		if err != nil {
			if cerr := s.Close(); cerr != nil {
				s.log.Warn("cleaning up after failed standby start", "err", cerr)
			}
		}
	}()
	if err := s.prepareDirs(opts.Dir); err != nil {
		return nil, err
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	slot := opts.Slot
	if slot == "" {
		slot = "standby_" + strconv.Itoa(s.port)
	}

	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("making a standby: connecting to the primary: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // only a read connection
	var major int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000`).Scan(&major); err != nil {
		return nil, fmt.Errorf("making a standby: reading the primary's version: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true)`, slot); err != nil {
		return nil, fmt.Errorf("making a standby: creating physical slot %q on the primary: %w", slot, err)
	}
	start, stop := `SELECT pg_backup_start('localpg standby', true)`, `SELECT labelfile FROM pg_backup_stop(false)`
	if major < 15 {
		start, stop = `SELECT pg_start_backup('localpg standby', true, false)`, `SELECT labelfile FROM pg_stop_backup(false, false)`
	}
	if _, err := conn.Exec(ctx, start); err != nil {
		return nil, fmt.Errorf("making a standby: starting the base backup: %w", err)
	}
	copyErr := copyDataDir(c.dataDir, s.dataDir, s.chown)
	var label string
	if err := conn.QueryRow(ctx, stop).Scan(&label); err != nil {
		return nil, errors.Join(copyErr, fmt.Errorf("making a standby: stopping the base backup: %w", err))
	}
	if copyErr != nil {
		return nil, fmt.Errorf("making a standby: copying the data directory: %w", copyErr)
	}
	if err := s.writeServerFile(filepath.Join(s.dataDir, "backup_label"), label); err != nil {
		return nil, err
	}
	if err := s.writeServerFile(filepath.Join(s.dataDir, "standby.signal"), ""); err != nil {
		return nil, err
	}

	for k, v := range c.settings {
		s.settings[k] = v
	}
	s.settings["hot_standby"] = "on"
	s.settings["hot_standby_feedback"] = "on"
	s.settings["primary_conninfo"] = fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres application_name=%s", c.port, User, slot)
	s.settings["primary_slot_name"] = slot
	for k, v := range opts.Settings {
		s.settings[k] = v
	}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	s.startWatchdog()
	if err := s.Restart(ctx); err != nil {
		return nil, fmt.Errorf("starting the standby: %w", err)
	}
	s.log.Info("standby started", "port", s.port, "primary_port", c.port, "slot", slot)
	return s, nil
}

// copyDataDir copies a data directory for a base backup: every file but
// the server's pid and options files, the WAL (pg_wal's subdirectories are
// kept empty) and the replication slots (pg_replslot's are skipped: a
// standby starts without the primary's slots). Files that vanish while it
// copies are skipped, as pg_basebackup does.
func copyDataDir(from, to string, chown func(string) error) error {
	skip := map[string]bool{"postmaster.pid": true, "postmaster.opts": true, "backup_label": true, "standby.signal": true}
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			if filepath.Dir(rel) == "pg_replslot" {
				return fs.SkipDir
			}
			if rel != "." {
				if err := os.MkdirAll(dst, 0o700); err != nil {
					return err
				}
				if err := chown(dst); err != nil {
					return err
				}
			}
			return nil
		}
		if skip[rel] || (strings.HasPrefix(rel, "pg_wal"+string(filepath.Separator)) && !d.IsDir()) {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := copyFile(path, dst); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return chown(dst)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // read only
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// Promote turns a standby into a primary (pg_ctl promote) and returns once
// it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("promoting postgres: %w", ErrClosed)
	}
	out, err := c.run(ctx, "pg_ctl", "promote", "-w", "-t", pgCtlTimeout, "-D", c.dataDir)
	if err != nil {
		return fmt.Errorf("promoting postgres on port %d: %w: %s\nserver log:\n%s", c.port, err, strings.TrimSpace(string(out)), c.LogTail(20))
	}
	c.log.Info("postgres promoted", "port", c.port)
	return nil
}

// Kill ends the server as a crash does: every process of the cluster (the
// postmaster and its children, walsenders included) is stopped with
// SIGSTOP first, so none of them sends or writes anything more, then
// killed with SIGKILL. The data directory is left as a crash leaves it;
// Restart runs crash recovery. Killing a stopped cluster is a no-op.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("killing postgres: %w", ErrClosed)
	}
	if !c.running {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("killing postgres: reading postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return fmt.Errorf("killing postgres: postmaster.pid holds %q", first)
	}
	pids := append([]int{pid}, children(pid)...)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGSTOP) // a process already gone is fine
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	for range 100 { // wait up to 10s for the postmaster to be gone
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.running = false
	c.log.Info("postgres killed", "port", c.port, "pids", len(pids))
	return nil
}

// children returns the pids whose parent is pid (from /proc).
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: the
		// fields after the last ')' are state, ppid, ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
