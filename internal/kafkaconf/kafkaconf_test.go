package kafkaconf_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A kafka.tls.* file or a kafka.sasl.mechanism that cannot be used is an
// error naming the option, never holding the password or the key.
func TestClientOptsRefuses(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := testenv.NewCA(t, "kafka-ca")
	leaf := ca.Issue(t, "walrelay-client", "walrelay")
	other := testenv.NewCA(t, "other").Issue(t, "other-client", "walrelay")
	key, err := os.ReadFile(leaf.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "S3cretPassw0rd"
	sasl := config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "u", Password: secret}

	tests := []struct {
		name string
		tls  config.KafkaTLS
		sasl config.KafkaSASL
		want string
	}{
		{"missing ca file", config.KafkaTLS{Enabled: true, CAFile: filepath.Join(dir, "nope.pem")}, sasl, "reading kafka.tls.ca_file"},
		{"ca file without PEM", config.KafkaTLS{Enabled: true, CAFile: notPEM}, sasl, "holds no PEM certificate"},
		{"key of another certificate", config.KafkaTLS{Enabled: true, CertFile: leaf.CertFile, KeyFile: other.KeyFile}, sasl, "loading kafka.tls.cert_file/key_file"},
		{"missing key file", config.KafkaTLS{Enabled: true, CertFile: leaf.CertFile, KeyFile: filepath.Join(dir, "nope.key")}, sasl, "loading kafka.tls.cert_file/key_file"},
		{"unknown mechanism", config.KafkaTLS{}, config.KafkaSASL{Mechanism: "GSSAPI", Username: "u", Password: secret}, `unknown SASL mechanism "GSSAPI"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := config.Default().Kafka
			k.TLS, k.SASL = tt.tls, tt.sasl
			_, err := kafkaconf.ClientOpts(k, kafkaconf.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ClientOpts = %v, want an error containing %q", err, tt.want)
			}
			if _, perr := kafkaconf.PublisherConfig(k, kafkaconf.Options{}); perr == nil || perr.Error() != err.Error() {
				t.Errorf("PublisherConfig = %v, want ClientOpts's error %v", perr, err)
			}
			if strings.Contains(err.Error(), secret) || bytes.Contains([]byte(err.Error()), bytes.TrimSpace(key)) {
				t.Errorf("the error holds a secret: %v", err)
			}
		})
	}
}

// The options reach a broker that requires TLS and SASL with each
// mechanism, with the client id configured, and only with the right
// credentials; with a registry they add walrelay_kafka_* metrics to it.
func TestClientOptsReachBrokers(t *testing.T) {
	ca := testenv.NewCA(t, "kafka-ca")
	server := ca.Issue(t, "broker", "127.0.0.1", "localhost")
	b := testenv.Kafka(t,
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server.TLS}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "plainuser", "plain-pass"),
		kfake.Superuser("SCRAM-SHA-256", "scram256", "scram256-pass"),
		kfake.Superuser("SCRAM-SHA-512", "scram512", "scram512-pass"),
	)
	if b.Cluster == nil {
		t.Skip("needs kfake with TLS and SASL (external brokers configured)")
	}
	for _, tt := range []struct {
		name string
		sasl config.KafkaSASL
		ok   bool
	}{
		{"PLAIN", config.KafkaSASL{Mechanism: "PLAIN", Username: "plainuser", Password: "plain-pass"}, true},
		{"SCRAM-SHA-256", config.KafkaSASL{Mechanism: "SCRAM-SHA-256", Username: "scram256", Password: "scram256-pass"}, true},
		{"SCRAM-SHA-512", config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "scram512-pass"}, true},
		{"wrong password", config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "scram512", Password: "wrong"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := config.Default().Kafka
			k.Brokers, k.ClientID = b.Addrs(), "relay-7"
			k.TLS = config.KafkaTLS{Enabled: true, CAFile: ca.CertFile(t)}
			k.SASL = tt.sasl
			reg := prometheus.NewRegistry()
			opts, err := kafkaconf.ClientOpts(k, kafkaconf.Options{Registry: reg, DialTimeout: kafkaconf.ShortDial})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if id := cl.OptValue(kgo.ClientID); id != "relay-7" {
				t.Errorf("client id %v, want relay-7", id)
			}
			if d := cl.OptValue(kgo.DialTimeout); d != kafkaconf.ShortDial {
				t.Errorf("dial timeout %v, want %v", d, kafkaconf.ShortDial)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err = cl.Ping(ctx)
			if tt.ok != (err == nil) {
				t.Fatalf("Ping = %v, want success %v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if v, _ := testenv.FindMetric(t, reg, "walrelay_kafka_connects_total", nil); v < 1 {
				t.Errorf("walrelay_kafka_connects_total = %v on the registry given, want at least 1", v)
			}
		})
	}
}

// With a log, franz-go's warnings go there as component=kafka-client,
// and its info and debug output does not.
func TestClientOptsLog(t *testing.T) {
	k := config.Default().Kafka
	k.Brokers = []string{"127.0.0.1:1"} // nothing listens
	var logs bytes.Buffer
	opts, err := kafkaconf.ClientOpts(k, kafkaconf.Options{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed port succeeded")
	}
	cl.Close()
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "component=kafka-client") || !strings.Contains(out, "unable to open connection to broker") {
		t.Errorf("franz-go's warning did not reach the log as component=kafka-client:\n%s", out)
	}
	if strings.Contains(out, "level=DEBUG") || strings.Contains(out, "level=INFO") {
		t.Errorf("franz-go's info or debug output reached the log:\n%s", out)
	}
}

// Without TLS, SASL, registry or log the options are the brokers and the
// client id alone, and franz-go's dial timeout stays its own.
func TestClientOptsPlain(t *testing.T) {
	k := config.Default().Kafka
	opts, err := kafkaconf.ClientOpts(k, kafkaconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.SeedBrokers); !slices.Equal(got.([]string), []string{"localhost:9092"}) {
		t.Errorf("seed brokers %v", got)
	}
	if got := cl.OptValue(kgo.DialTLSConfig); got != (*tls.Config)(nil) {
		t.Errorf("TLS config %v, want none", got)
	}
	if got := cl.OptValue(kgo.SASL); got != nil && len(got.([]sasl.Mechanism)) != 0 {
		t.Errorf("SASL %v, want none", got)
	}
	if got := cl.OptValue(kgo.DialTimeout); got != 10*time.Second {
		t.Errorf("dial timeout %v, want franz-go's 10s", got)
	}
	if got := cl.OptValue(kgo.WithLogger); got != nil {
		t.Errorf("logger %v, want none", got)
	}
}

// PublisherConfig carries config.Kafka's producer settings, and the
// publisher accepts it as it is (nothing left to default).
func TestPublisherConfig(t *testing.T) {
	k := config.Default().Kafka
	k.Linger, k.BatchMaxBytes, k.ClientMetrics, k.TransactionTimeout = 0, 4096, true, 2*time.Minute
	k.TopicConfigs = map[string]string{"cleanup.policy": "compact"}
	cfg, err := kafkaconf.PublisherConfig(k, kafkaconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Linger != 0 || cfg.BatchMaxBytes != 4096 || !cfg.ClientMetrics || cfg.TransactionTimeout != 2*time.Minute ||
		!cfg.CreateTopics || cfg.TopicPartitions != -1 || cfg.TopicReplicationFactor != -1 || cfg.TopicConfigs["cleanup.policy"] != "compact" {
		t.Errorf("PublisherConfig = %+v, not config.Kafka's", cfg)
	}
	cfg.Done = func(*kgo.Record, error) {}
	p, err := publisher.New(cfg, nil)
	if err != nil {
		t.Fatalf("publisher.New(PublisherConfig) = %v", err)
	}
	p.Close()
}
