package main

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestKafkaTLSMismatch: TLS against a plaintext listener, and plaintext
// against a TLS one, are said as such by check and stop run at startup,
// instead of "no broker answered ... context deadline exceeded" and
// endless i/o timeouts.
func TestKafkaTLSMismatch(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	setupOutbox(t, dsn)
	ca := testenv.NewCA(t, "kafka-ca")
	server := ca.Issue(t, "broker", "127.0.0.1", "localhost")
	plain := testenv.Kafka(t)
	secure := testenv.Kafka(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}, MinVersion: tls.VersionTLS12}))
	for _, tc := range []struct {
		name   string
		broker *testenv.Broker
		args   []string
		want   string
	}{
		{"TLS against plaintext", plain, []string{"--kafka.tls.enabled", "--kafka.tls.ca_file=" + ca.CertFile(t)}, "TLS handshake with " + plain.Addrs()[0] + " failed: is the listener plaintext?"},
		{"plaintext against TLS", secure, nil, "Kafka request to " + secure.Addrs()[0] + " without TLS got no answer: is the listener TLS?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := childEnv(
				"WALRELAY_POSTGRES_DSN="+dsn,
				"WALRELAY_KAFKA_BROKERS="+strings.Join(tc.broker.Addrs(), ","),
				"WALRELAY_LOG_FORMAT=json",
			)
			stdout, stderr, code := walrelay(t, env, append([]string{"check"}, tc.args...)...)
			if code == 0 || !strings.Contains(stdout, tc.want) {
				t.Errorf("check: exit %d, want a failure saying %q\nstdout:\n%s\nstderr:\n%s", code, tc.want, stdout, stderr)
			}
			c := startChild(t, env, append([]string{"run"}, tc.args...)...)
			if code := c.wait(t, 60*time.Second); code == 0 || !strings.Contains(c.stderr.String(), tc.want) {
				t.Errorf("run: exit %d, want a failure saying %q\nstderr:\n%s", code, tc.want, c.stderr.String())
			}
		})
	}
}
