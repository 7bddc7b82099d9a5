package relay_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/testenv"
)

// secureFixture is a fixture whose kfake broker requires TLS and SASL.
func secureFixture(t *testing.T, serverTLS *tls.Config, mutate func(*config.Config)) *fixture {
	t.Helper()
	f := newFixture(t, mutate)
	if f.broker.Cluster == nil {
		t.Skip("needs kfake with TLS and SASL (external brokers configured)")
	}
	// Replace the fixture's plain broker with a secured one.
	b := testenv.Kafka(t,
		kfake.TLS(serverTLS),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", "plain-pass"),
		kfake.Superuser("SCRAM-SHA-256", "scram256", "scram256-pass"),
		kfake.Superuser("SCRAM-SHA-512", "scram512", "scram512-pass"),
	)
	f.broker = b
	f.cfg.Kafka.Brokers = b.Addrs()
	return f
}

func TestRelayKafkaTLSAndSASL(t *testing.T) {
	ca := testenv.NewCA(t, "kafka-ca")
	server := ca.Issue(t, "broker", "127.0.0.1", "localhost")
	client := ca.Issue(t, "walrelay-client", "walrelay")
	other := testenv.NewCA(t, "some-other-ca")
	serverTLS := &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}

	tests := []struct {
		name    string
		tls     config.KafkaTLS
		sasl    config.KafkaSASL
		wantErr string // "" = publishes
	}{
		{"SCRAM-SHA-512 over TLS", config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t)}, config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "scram512-pass"}, ""},
		{"SCRAM-SHA-256 over TLS", config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t)}, config.KafkaSASL{Mechanism: "SCRAM-SHA-256", Username: "scram256", Password: "scram256-pass"}, ""},
		{"PLAIN over mutual TLS", config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t), CertFile: client.CertFile, KeyFile: client.KeyFile}, config.KafkaSASL{Mechanism: "PLAIN", Username: "plainuser", Password: "plain-pass"}, ""},
		{"wrong password", config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t)}, config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "Wr0ngPassw0rd"}, "SASL authentication"},
		{"wrong CA", config.KafkaTLS{Enabled: true, CAFile: other.CertFile(t)}, config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "scram512-pass"}, "TLS certificate does not verify"},
		{"wrong server name", config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t), ServerName: "kafka.example.com"}, config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "scram512-pass"}, "TLS certificate does not verify"},
		{"TLS off against a TLS broker", config.KafkaTLS{}, config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "scram512-pass"}, "is the listener TLS?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := secureFixture(t, serverTLS, func(c *config.Config) {
				c.Kafka.TLS, c.Kafka.SASL = tt.tls, tt.sasl
			})
			run := f.start(t)
			if tt.wantErr != "" {
				start := time.Now()
				err := run.wait(30 * time.Second)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Run = %v, want an error containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, publisher.ErrBrokerAccess) {
					t.Errorf("Run = %v, want ErrBrokerAccess", err)
				}
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("took %s to fail: not fast", took)
				}
				for _, secret := range []string{"Wr0ngPassw0rd", "scram512-pass"} {
					if strings.Contains(err.Error(), secret) || strings.Contains(f.logs.String(), secret) {
						t.Errorf("password %q appears in the error or the log", secret)
					}
				}
				return
			}
			execTx(t, f.dsn, insertEvent("order", "o-1"))
			waitMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": "outbox.event.order"}, "1", func(v float64) bool { return v == 1 })
			f.waitCaughtUp(t, 15*time.Second)
			if err := run.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A broker that requires a client certificate refuses a client without
// one, and the relay says so at once.
func TestRelayKafkaMutualTLSRequired(t *testing.T) {
	ca := testenv.NewCA(t, "kafka-ca")
	server := ca.Issue(t, "broker", "127.0.0.1")
	client := ca.Issue(t, "walrelay-client", "walrelay")
	serverTLS := &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	sasl := config.KafkaSASL{Mechanism: "PLAIN", Username: "plainuser", Password: "plain-pass"}

	f := secureFixture(t, serverTLS, func(c *config.Config) {
		c.Kafka.TLS = config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t)}
		c.Kafka.SASL = sasl
	})
	err := f.start(t).wait(30 * time.Second)
	if !errors.Is(err, publisher.ErrBrokerAccess) {
		t.Fatalf("without a client certificate: Run = %v, want ErrBrokerAccess", err)
	}

	f.cfg.Kafka.TLS = config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t), CertFile: client.CertFile, KeyFile: client.KeyFile}
	run := f.start(t)
	execTx(t, f.dsn, insertEvent("order", "o-1"))
	deadline := time.Now().Add(20 * time.Second)
	for v, _ := testenv.FindMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": "outbox.event.order"}); v != 1; v, _ = testenv.FindMetric(t, f.reg, "walrelay_events_published_total", map[string]string{"topic": "outbox.event.order"}) {
		if run.exited() || time.Now().After(deadline) {
			t.Fatalf("with a client certificate the event was not published (relay exited: %v, err: %v)", run.exited(), run.err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
