// Package kafkaconf turns config.Kafka into franz-go client options, for
// every client walrelay opens outside the publisher's own (the relay's
// producer, verify's reader, check, the heal's deduplication, debezium
// takeover).
//
// In: a validated config.Kafka. Out: []kgo.Opt, or an error naming the
// kafka.tls.* file or kafka.sasl.mechanism that cannot be used (never a
// password or a key).
//
// It does not connect. (Moved here from internal/admin, whose Postgres
// and operator parts became internal/postgres and internal/operator,
// neither of which may hold Kafka options the relay uses.)
package kafkaconf

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/publisher"
)

// KafkaOpts are the client options the relay's publisher would connect
// with: brokers, client id, TLS and SASL.
func KafkaOpts(k config.Kafka) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.ClientID(k.ClientID), kgo.DialTimeout(3 * time.Second)}
	if k.TLS.Enabled {
		tc, err := publisher.TLSConfig(k.TLS.CAFile, k.TLS.CertFile, k.TLS.KeyFile, k.TLS.ServerName)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	mech, err := publisher.SASLMechanism(k.SASL.Mechanism, k.SASL.Username, k.SASL.Password)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}
