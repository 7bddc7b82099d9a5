package bench

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := Default()
	ok.BrokerCommand = []string{"x", "kfake"}
	cases := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // "" means valid
	}{
		{"default", func(*Config) {}, ""},
		{"nothing to do", func(c *Config) { c.Backlogs, c.Lives = nil, nil }, "nothing to measure"},
		{"N not a multiple", func(c *Config) { c.Backlogs = []Backlog{{Shape{100}, 150}} }, "multiple"},
		{"status interval", func(c *Config) { c.StatusInterval = time.Millisecond }, "status-interval=1ms"},
		{"no broker", func(c *Config) { c.BrokerCommand = nil }, "broker-command"},
		{"bad env", func(c *Config) { c.WalrelayEnv = []string{"KAFKA_LINGER=1ms"} }, "walrelay-env=KAFKA_LINGER=1ms"},
		{"repeat", func(c *Config) { c.Repeat = 0 }, "repeat=0"},
		{"unix socket", func(c *Config) { c.PGUnixSocket = true }, ""},
		{"unix socket with dsn", func(c *Config) { c.PGUnixSocket, c.DSN = true, "postgres://x@db/x" }, "pg-unix-socket"},
		{"kfake heap", func(c *Config) { c.KfakeHeapMiB = -1 }, "kfake-heap-mib=-1"},
		{"kfake default collector", func(c *Config) { c.KfakeHeapMiB = 0 }, ""},
		{"blackhole with live runs", func(c *Config) { c.KfakeBlackhole = true }, "kfake-blackhole=true"},
		{"blackhole for backlogs", func(c *Config) { c.KfakeBlackhole, c.Lives = true, nil }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
