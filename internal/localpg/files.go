package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file lays out the cluster's directory (data, socket, log), writes its
// configuration files and, when this process runs as root, hands them to the
// server's OS user.

// prepareDirs creates the directory layout and hands the parts the server
// writes to the server's OS user.
func (c *Cluster) prepareDirs(parent string) error {
	if parent == "" {
		d, err := os.MkdirTemp("", "walrelay-pg-")
		if err != nil {
			return fmt.Errorf("creating cluster directory: %w", err)
		}
		c.removes = append(c.removes, d)
		parent = d
	} else {
		abs, err := filepath.Abs(parent)
		if err != nil {
			return fmt.Errorf("resolving cluster directory %q: %w", parent, err)
		}
		parent = abs
		if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("creating cluster directory: %w", err)
			}
			c.removes = append(c.removes, parent)
		} else if err != nil {
			return fmt.Errorf("checking cluster directory: %w", err)
		}
	}
	c.dir = parent
	// The server's OS user must be able to reach the directory.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return fmt.Errorf("making cluster directory traversable: %w", err)
	}
	if c.cred != nil {
		if err := checkTraversable(c.dir); err != nil {
			return err
		}
	}

	c.dataDir = filepath.Join(c.dir, "data")
	c.sockDir = filepath.Join(c.dir, "run")
	c.logFile = filepath.Join(c.dir, "postgres.log")
	if len(c.sockDir)+len("/.s.PGSQL.65535.lock") > maxSocketPath {
		d, err := os.MkdirTemp("", "wrpg-")
		if err != nil {
			return fmt.Errorf("creating socket directory: %w", err)
		}
		c.removes = append(c.removes, d)
		c.sockDir = d
	}
	for _, d := range []struct {
		path string
		perm os.FileMode
	}{{c.dataDir, 0o700}, {c.sockDir, 0o755}} {
		if err := os.MkdirAll(d.path, d.perm); err != nil {
			return fmt.Errorf("creating %s: %w", d.path, err)
		}
		if err := os.Chmod(d.path, d.perm); err != nil {
			return fmt.Errorf("setting mode of %s: %w", d.path, err)
		}
		if err := c.chown(d.path); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(c.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("creating server log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("creating server log: %w", err)
	}
	return c.chown(c.logFile)
}

func (c *Cluster) initdb(ctx context.Context) error {
	start := time.Now()
	out, err := c.run(ctx, "initdb", "-D", c.dataDir, "-U", User, "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if err != nil {
		return fmt.Errorf("running initdb in %s: %w: %s", c.dataDir, err, bytes.TrimSpace(out))
	}
	// Our settings live in walrelay.conf, included last so they win, and
	// rewritten on every start (the port may change).
	conf := filepath.Join(c.dataDir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening postgresql.conf: %w", err)
	}
	_, werr := f.WriteString("\n# added by walrelay localpg\ninclude 'walrelay.conf'\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("appending to postgresql.conf: %w", err)
	}
	hba := "# written by walrelay localpg: trust for local and loopback, replication included\n" +
		"local all all trust\n" +
		"host all all 127.0.0.1/32 trust\n" +
		"local replication all trust\n" +
		"host replication all 127.0.0.1/32 trust\n"
	if err := c.writeServerFile(filepath.Join(c.dataDir, "pg_hba.conf"), hba); err != nil {
		return err
	}
	c.log.Info("initdb done", "data_dir", c.dataDir, "took", time.Since(start))
	return nil
}

func (c *Cluster) writeConfig() error {
	s := make(map[string]string, len(c.settings)+3)
	for k, v := range c.settings {
		s[k] = v
	}
	s["listen_addresses"] = "127.0.0.1"
	s["port"] = strconv.Itoa(c.port)
	s["unix_socket_directories"] = c.sockDir
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by walrelay localpg on every start; do not edit\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(s[k], "'", "''"))
	}
	return c.writeServerFile(filepath.Join(c.dataDir, "walrelay.conf"), b.String())
}

func (c *Cluster) writeServerFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return c.chown(path)
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("handing %s to OS user %s: %w", path, osUser, err)
	}
	return nil
}

func lookupCredential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w (create it with: useradd --system %s, or install postgresql)", err, name)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// checkTraversable reports an ancestor of dir that the server's OS user
// cannot enter (no o+x), which would make initdb fail obscurely.
func checkTraversable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking %s: %w", d, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("checking cluster directory %s: ancestor %s (mode %v) is not traversable by OS user %s; use a directory under %s or chmod o+x it",
				dir, d, fi.Mode().Perm(), osUser, os.TempDir())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
