package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/cli"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/testenv"
)

// envChild makes the test binary act as walrelay: with it set, TestMain
// runs the command line after "--" instead of the tests. Variables named
// WALRELAY_TEST_* are not configuration, so it does not disturb loading.
const envChild = "WALRELAY_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		// What main does, with the arguments after "--".
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, args, os.Stdout, os.Stderr)
		stop()
		os.Exit(cli.ExitCode("walrelay", err, os.Stderr))
	}
	testenv.Main(m)
}

// child is a walrelay process (the re-executed test binary).
type child struct {
	args           []string
	cmd            *exec.Cmd
	stdout, stderr testenv.SyncBuffer // collected while it runs
	done           chan struct{}
	code           int // exit code, -1 if killed by a signal; valid after done
}

// childEnv is the environment of a child: this process's, minus any
// WALRELAY_ configuration it may carry, plus vars (NAME=value).
func childEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, config.EnvPrefix) && !strings.HasPrefix(kv, config.EnvPrefix+"TEST_") && !strings.HasPrefix(kv, config.EnvPrefix+"PG_BIN=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, envChild+"=1")
	// No metrics/health listener unless asked: several children may run
	// at once and a fixed port would collide.
	if hasOption("WALRELAY_HTTP_LISTEN") {
		env = append(env, "WALRELAY_HTTP_LISTEN=")
	}
	return append(env, vars...)
}

// hasOption reports whether the config has an option with this variable.
func hasOption(envName string) bool {
	def := config.Default()
	for _, f := range config.Fields(&def) {
		if f.Env == envName {
			return true
		}
	}
	return false
}

// startChild starts `walrelay args...` with env; it is killed at cleanup if
// still running.
func startChild(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	c := &child{args: args, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], append([]string{"--"}, args...)...)
	c.cmd.Env = env
	c.cmd.Stdout = &c.stdout
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting walrelay %v: %v", args, err)
	}
	go func() {
		err := c.cmd.Wait()
		c.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.code = ee.ExitCode()
		} else if err != nil {
			c.code = -2
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.exited() {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("walrelay %v (exit %d)\nstdout:\n%s\nstderr:\n%s", c.args, c.code, c.stdout.String(), c.stderr.String())
		}
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the child to exit and returns its code.
func (c *child) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(timeout):
		t.Fatalf("walrelay %v still running after %s\nstderr:\n%s", c.args, timeout, c.stderr.String())
		return 0
	}
}

func (c *child) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v to walrelay: %v", sig, err)
	}
}

// walrelay runs `walrelay args...` to completion and returns its output
// and exit code.
func walrelay(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := startChild(t, env, args...)
	code = c.wait(t, 60*time.Second)
	return c.stdout.String(), c.stderr.String(), code
}

// noStackTrace fails the test if out looks like a Go panic or stack trace.
func noStackTrace(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range []string{"panic:", "goroutine ", "runtime/debug", ".go:"} {
		if strings.Contains(out, s) {
			t.Errorf("%s contains %q (a stack trace?):\n%s", what, s, out)
		}
	}
}

// withPassword returns dsn (a URL) with password set in its userinfo and,
// if port is not empty, that port.
func withPassword(t *testing.T, dsn, password, port string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parsing test DSN: %v", err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	if port != "" {
		u.Host = u.Hostname() + ":" + port
	}
	return u.String()
}

// optionEnvs lists every option's environment variable.
func optionEnvs() []string {
	def := config.Default()
	var out []string
	for _, f := range config.Fields(&def) {
		out = append(out, f.Env)
	}
	return out
}
