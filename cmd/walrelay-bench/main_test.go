package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/bench"
	"github.com/walrelay/walrelay/internal/cli"
)

// TestUsageErrors checks that bad flags fail before anything starts, with
// exit status 2 and a message naming the flag.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "unknown flag"},
		{"bad backlog", []string{"--backlog", "batch:10"}, "--backlog"},
		{"bad live", []string{"--live", "onetx@5"}, "--live"},
		{"messages in a live run", []string{"--live", "msg-single@5"}, "--live"},
		{"blackhole with live", []string{"--kfake-blackhole", "--backlog", "single:10"}, "kfake-blackhole"},
		{"nothing to run", []string{"--backlog", "none", "--live", "none"}, "nothing to measure"},
		{"N not a multiple", []string{"--backlog", "tx100:150", "--live", "none"}, "multiple"},
		{"bad env", []string{"--walrelay-env", "LINGER=1ms", "--live", "none"}, "walrelay-env"},
		{"unix socket with dsn", []string{"--pg-unix-socket", "--dsn", "postgres://x@db/x", "--live", "none"}, "pg-unix-socket"},
		{"positional argument", []string{"extra"}, "unknown command"},
		{"bad delivery", []string{"--delivery", "exactly-once", "--live", "none"}, "--delivery"},
		{"delivery twice", []string{"--delivery", "exactly_once,exactly_once", "--live", "none"}, "given twice"},
		{"deliveries with live runs", []string{"--delivery", "at_least_once,exactly_once"}, "live runs measure at_least_once only"},
		{"exactly_once on a blackhole", []string{"--delivery", "exactly_once", "--kfake-blackhole", "--live", "none"}, "kfake-blackhole"},
		{"delivery in walrelay-env", []string{"--walrelay-env", "WALRELAY_RELAY_DELIVERY=exactly_once", "--live", "none"}, "--delivery"},
		{"too many repetitions for two modes", []string{"--delivery", "at_least_once,exactly_once", "--live", "none", "--repeat", "20"}, "repeat=20"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if code := cli.ExitCode("walrelay-bench", err, &stderr); code != 2 {
				t.Fatalf("exit code %d, want 2 (stderr: %s)", code, stderr.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"kfake", "--help"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("run(%q) = %v", args, err)
		}
		if !strings.Contains(stdout.String(), "Usage:") {
			t.Errorf("run(%q) printed no usage:\n%s", args, stdout.String())
		}
	}
}

// TestDeliveryFlag checks what --delivery puts in the configuration: the
// modes in order, or nothing without the flag (walrelay's default alone).
func TestDeliveryFlag(t *testing.T) {
	cases := []struct {
		name string
		flag string
		want []string
	}{
		{"absent", "", nil},
		{"both", "at_least_once,exactly_once", []string{"at_least_once", "exactly_once"}},
		{"exactly_once first", "exactly_once,at_least_once", []string{"exactly_once", "at_least_once"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bench.Default()
			f := benchFlags{backlogs: bench.FormatList(cfg.Backlogs), lives: "none", deliveries: tc.flag}
			if err := f.apply(&cfg); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Deliveries, tc.want) {
				t.Fatalf("--delivery %q: Deliveries = %q, want %q", tc.flag, cfg.Deliveries, tc.want)
			}
		})
	}
}
