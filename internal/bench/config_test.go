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
		{"N not a multiple", func(c *Config) { c.Backlogs = []Backlog{{Shape{RowsPerTx: 100}, 150}} }, "multiple"},
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
		{"deliveries compared", func(c *Config) { c.Deliveries, c.Lives = []string{"at_least_once", "exactly_once"}, nil }, ""},
		{"at_least_once alone with live runs", func(c *Config) { c.Deliveries = []string{"at_least_once"} }, ""},
		{"deliveries with live runs", func(c *Config) { c.Deliveries = []string{"at_least_once", "exactly_once"} }, "live runs measure at_least_once only"},
		{"unknown delivery", func(c *Config) { c.Deliveries, c.Lives = []string{"exactly-once"}, nil }, "delivery=exactly-once"},
		{"delivery twice", func(c *Config) { c.Deliveries, c.Lives = []string{"exactly_once", "exactly_once"}, nil }, "given twice"},
		{"exactly_once on a blackhole", func(c *Config) {
			c.Deliveries, c.Lives, c.KfakeBlackhole = []string{"exactly_once"}, nil, true
		}, "kfake-blackhole=true: exactly_once"},
		{"three slots per repetition", func(c *Config) {
			c.Deliveries, c.Lives, c.Repeat = []string{"at_least_once", "exactly_once"}, nil, 17
		}, "repeat=17: must be between 1 and 16 (three slots each)"},
		{"25 repetitions of one mode", func(c *Config) { c.Repeat = 25 }, ""},
		{"26 repetitions of one mode", func(c *Config) { c.Repeat = 26 }, "repeat=26: must be between 1 and 25 (two slots each)"},
		{"json converter", func(c *Config) { c.Converter = "json" }, ""},
		{"avro converter", func(c *Config) { c.Converter = "avro" }, ""},
		{"unknown converter", func(c *Config) { c.Converter = "protobuf" }, "converter=protobuf"},
		{"converter in walrelay-env", func(c *Config) {
			c.Converter, c.WalrelayEnv = "avro", []string{"WALRELAY_CONVERTER_VALUE=json"}
		}, "give the value converter with --converter"},
		{"delivery in walrelay-env", func(c *Config) { c.WalrelayEnv = []string{"WALRELAY_RELAY_DELIVERY=exactly_once"} }, "give the delivery mode with --delivery"},
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
