package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/publisher"
)

// kafkaTimeout bounds each Kafka request of the check.
const kafkaTimeout = 5 * time.Second

// checkKafka checks the brokers answer and that each topic exists or may
// be created; with relay.delivery=exactly_once, also that the brokers
// support transactions, the principal may use transactional id txnID (""
// when not known), and the checkpoint topic (checktxn.go).
func checkKafka(ctx context.Context, cfg config.Config, topics map[string]bool, txnID string) []Item {
	brokers := strings.Join(cfg.Kafka.Brokers, ",")
	opts, err := kafkaconf.ClientOpts(cfg.Kafka, kafkaconf.Options{DialTimeout: kafkaconf.ShortDial})
	if err != nil {
		return []Item{{Name: "kafka brokers", Status: Fail, Detail: err.Error(), Fix: "fix kafka.tls.* / kafka.sasl.*"}}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return []Item{{Name: "kafka brokers", Status: Fail, Detail: err.Error(), Fix: "fix kafka.brokers"}}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	bctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	bs, err := adm.ListBrokers(bctx)
	if err != nil {
		// TLS against a plaintext listener times out, plaintext against
		// a TLS one reads EOF: say which instead of "no answer".
		tlsCfg, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config) // nil: plaintext
		if m := publisher.ProbeBrokers(ctx, cfg.Kafka.Brokers, tlsCfg); m != nil {
			return []Item{{Name: "kafka brokers", Status: Fail, Detail: m.Error(), Fix: "make kafka.tls.enabled match the listener of kafka.brokers (see the message)"}}
		}
		return []Item{{Name: "kafka brokers", Status: Fail, Detail: fmt.Sprintf("no broker of %s answered: %v", brokers, err),
			Fix: "check kafka.brokers (host:port of the listeners) and that the brokers are up and reachable from here"}}
	}
	items := []Item{{Name: "kafka brokers", Status: OK, Detail: fmt.Sprintf("%d broker(s) answered via %s", len(bs), brokers)}}
	items = append(items, topicItems(ctx, adm, cfg, topics)...)
	if cfg.Relay.ExactlyOnce() {
		items = append(items, exactlyOnceItems(ctx, cl, adm, cfg, txnID)...)
	}
	return items
}

// topicItems checks that each routed topic exists, or that walrelay may
// create it (kafka.create_topics).
func topicItems(ctx context.Context, adm *kadm.Client, cfg config.Config, topics map[string]bool) []Item {
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return []Item{{Name: "kafka topics", Status: OK, Detail: "no routed topic known yet (the outbox has no rows to route); topics follow router.route.topic.replacement"}}
	}
	tctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	details, err := adm.ListTopics(tctx, names...)
	if err != nil {
		return []Item{{Name: "kafka topics", Status: Fail, Detail: fmt.Sprintf("listing topics: %v", err), Fix: "grant walrelay's principal DESCRIBE on the topics"}}
	}
	var items []Item
	var missing []string
	for _, t := range names {
		if details.Has(t) {
			items = append(items, Item{Name: "topic " + t, Status: OK, Detail: "exists"})
		} else {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return items
	}
	if !cfg.Kafka.CreateTopics {
		for _, t := range missing {
			items = append(items, Item{Name: "topic " + t, Status: Fail, Detail: "does not exist and kafka.create_topics is off", Fix: "create the topic, or set kafka.create_topics=true"})
		}
		return items
	}
	configs := map[string]*string{}
	for k, v := range cfg.Kafka.TopicConfigs {
		configs[k] = kadm.StringPtr(v)
	}
	refused, err := validateCreate(ctx, adm, cfg.Kafka.TopicPartitions, cfg.Kafka.TopicReplicationFactor, configs, missing)
	for _, t := range missing {
		switch {
		case err != nil:
			items = append(items, Item{Name: "topic " + t, Status: Fail, Detail: fmt.Sprintf("does not exist, and validating its creation failed: %v", err), Fix: "create the topic, or grant walrelay's principal CREATE"})
		case refused[t] != "":
			items = append(items, Item{Name: "topic " + t, Status: Fail, Detail: "does not exist and the broker would refuse to create it: " + refused[t], Fix: "create the topic by hand, or fix kafka.topic_* options and the principal's CREATE permission"})
		default:
			items = append(items, Item{Name: "topic " + t, Status: OK, Detail: "does not exist yet; walrelay will create it (kafka.create_topics)"})
		}
	}
	return items
}

// validateCreate asks the brokers whether they would create topics with
// these settings, without creating anything (CreateTopics with
// ValidateOnly, which needs the same CREATE permission), and returns why
// for each topic they would refuse. An error means the request itself
// failed, so nothing is known about any topic.
func validateCreate(ctx context.Context, adm *kadm.Client, partitions int32, replicationFactor int16, configs map[string]*string, topics []string) (refused map[string]string, err error) {
	vctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	resps, err := adm.ValidateCreateTopics(vctx, partitions, replicationFactor, configs, topics...)
	if err != nil {
		return nil, err
	}
	refused = map[string]string{}
	for _, t := range topics {
		r, ok := resps[t]
		switch {
		case !ok:
			refused[t] = "no answer"
		case r.Err != nil:
			why := r.Err.Error()
			if r.ErrMessage != "" {
				why += ": " + r.ErrMessage
			}
			refused[t] = why
		}
	}
	return refused, nil
}
