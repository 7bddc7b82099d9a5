package kafkaconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kprom"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/publisher"
)

// Options are what a client needs beyond config.Kafka. The zero value is
// a client with franz-go's dial timeout, no metrics and no log.
type Options struct {
	// Registry, when not nil, gets franz-go's client metrics (kprom,
	// walrelay_kafka_*). A registry holds one client's: the client
	// registers them when created and removes them when closed.
	Registry prometheus.Registerer
	// Log, when not nil, gets franz-go's own warnings and errors (with
	// component=kafka-client); franz-go's info and debug output is about
	// its own workings, and asking for it costs on every request.
	Log *slog.Logger
	// DialTimeout bounds each connection attempt (0: franz-go's, 10s).
	// The short-lived clients of check, verify and the readers use
	// ShortDial, so that a broker that does not answer fails them fast.
	DialTimeout time.Duration
}

// ShortDial is the dial timeout of walrelay's short-lived Kafka clients
// (check, verify, the checkpoint and offset readers, the heal's
// deduplication): a broker that does not answer fails them fast.
const ShortDial = 3 * time.Second

// Publisher timings walrelay does not make configurable: the backoff
// between attempts to prepare a topic after a transient error, and how
// long a topic Kafka refused stays refused before it is prepared again
// (so an ACL granted later is noticed without a restart).
const (
	prepareMinBackoff  = 250 * time.Millisecond
	prepareMaxBackoff  = 30 * time.Second
	rejectedTopicRetry = 30 * time.Second
)

// ClientOpts returns the franz-go options that reach the brokers of k as
// walrelay does: seed brokers, client id, TLS (its PEM files read now),
// SASL, and, per o, the dial timeout, client metrics and log. Add the
// options of the client's role (consuming, producing) after them.
func ClientOpts(k config.Kafka, o Options) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.ClientID(k.ClientID)}
	if o.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(o.DialTimeout))
	}
	if k.TLS.Enabled {
		tc, err := TLSConfig(k.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	mech, err := SASLMechanism(k.SASL)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if o.Registry != nil {
		opts = append(opts, kgo.WithHooks(clientMetrics(o.Registry)))
	}
	if o.Log != nil {
		opts = append(opts, kgo.WithLogger(kslog.New(slog.New(warnAndAbove{o.Log.With("component", "kafka-client").Handler()}))))
	}
	return opts, nil
}

// PublisherConfig returns the publisher's configuration from k: the
// client (ClientOpts with o), topic creation, batching, client telemetry
// and the transaction timeout, and walrelay's fixed preparation timings.
// The caller sets what is its own: Done, MaxBufferedRecords and
// TransactionalID.
func PublisherConfig(k config.Kafka, o Options) (publisher.Config, error) {
	client, err := ClientOpts(k, o)
	if err != nil {
		return publisher.Config{}, err
	}
	return publisher.Config{
		Client:                 client,
		CreateTopics:           k.CreateTopics,
		TopicPartitions:        k.TopicPartitions,
		TopicReplicationFactor: k.TopicReplicationFactor,
		TopicConfigs:           k.TopicConfigs,
		Linger:                 k.Linger,
		BatchMaxBytes:          k.BatchMaxBytes,
		ClientMetrics:          k.ClientMetrics,
		TransactionTimeout:     k.TransactionTimeout,
		MinBackoff:             prepareMinBackoff,
		MaxBackoff:             prepareMaxBackoff,
		RejectedTopicRetry:     rejectedTopicRetry,
	}, nil
}

// TLSConfig builds the client TLS configuration from kafka.tls.*'s PEM
// files: ca_file verifies the brokers (empty: the system roots),
// cert_file/key_file is an optional client certificate, server_name
// overrides the name verified. Errors name the files, never their
// contents.
func TLSConfig(t config.KafkaTLS) (*tls.Config, error) {
	cfg, err := pemTLS(t.CAFile, t.CertFile, t.KeyFile, "kafka.tls.ca_file", "kafka.tls.cert_file/key_file")
	if err != nil {
		return nil, err
	}
	cfg.ServerName = t.ServerName
	return cfg, nil
}

// pemTLS builds a client TLS configuration from PEM files: caFile
// verifies the server (empty: the system roots), certFile/keyFile is an
// optional client certificate (the same file when it holds both, as a
// registry's PEM keystore does). caOpt and certOpt name the options in
// errors, which never quote the files' contents.
func pemTLS(caFile, certFile, keyFile, caOpt, certOpt string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", caOpt, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %q holds no PEM certificate", caOpt, caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", certOpt, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// SASLMechanism returns the franz-go mechanism for kafka.sasl.mechanism
// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, or nil for "" (no SASL). The
// password is kafka.sasl.password as loaded (from WALRELAY_KAFKA_SASL_PASSWORD_FILE
// too: package config reads it).
func SASLMechanism(s config.KafkaSASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("unknown SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
}

// clientMetrics is franz-go's kprom plugin on reg, with one histogram on:
// each request's round trip to its broker (written to response read),
// which tells the broker's share of produce_ack_latency from the time
// records wait in the client.
func clientMetrics(reg prometheus.Registerer) *kprom.Metrics {
	return kprom.NewMetrics(metrics.Namespace, kprom.Registerer(reg), kprom.Subsystem("kafka"),
		kprom.HistogramsFromOpts(kprom.HistogramOpts{Enable: kprom.RequestDurationE2E, Buckets: metrics.LatencyBuckets()}))
}

// warnAndAbove passes franz-go's warnings and errors to the log, and
// nothing below: franz-go's info and debug output is about its own
// workings, and asking for it costs on every request.
type warnAndAbove struct{ slog.Handler }

func (h warnAndAbove) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndAbove) WithAttrs(as []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(as)}
}

func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}
