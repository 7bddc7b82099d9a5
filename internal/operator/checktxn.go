package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
)

// This file holds the preflight's exactly-once items (relay.delivery=
// exactly_once): "kafka transactions", whether the brokers support them
// and the principal may use the relay's transactional id, and "checkpoint
// topic", whether the topic the relay writes a checkpoint to in every
// transaction exists or may be created.
//
// The check never sends InitProducerId with the relay's transactional id:
// that bumps the id's epoch, which fences a running relay and aborts its
// open transaction. It asks only what leaves the id's state alone:
// FindCoordinator (DESCRIBE on the id), and AddPartitionsToTxn for a
// producer id no producer has (-1). For a client's AddPartitionsToTxn
// (v3 or older, which franz-go sends), Kafka checks WRITE on the id, then
// WRITE on the topic, before it looks the producer up, so the answer says
// which permission is missing; with both granted the coordinator refuses
// the unknown producer (INVALID_PRODUCER_ID_MAPPING) without touching the
// id's transaction.

// noProducerID is a producer id Kafka never assigns (RecordBatch.NO_PRODUCER_ID).
const noProducerID = -1

// transactionalID is the transactional id walrelay run would use on
// conn's server; "" when reading what it is derived from fails.
func transactionalID(ctx context.Context, cfg config.Config, conn *pgx.Conn) string {
	if cfg.Kafka.TransactionalID != "" {
		return cfg.Kafka.TransactionalID
	}
	id, err := postgres.TransactionalID(ctx, conn, cfg)
	if err != nil {
		return ""
	}
	return id.ID
}

// exactlyOnceItems returns the "kafka transactions" and "checkpoint topic"
// items for transactional id txnID ("" when it is not known).
func exactlyOnceItems(ctx context.Context, cl *kgo.Client, adm *kadm.Client, cfg config.Config, txnID string) []Item {
	txn, topicWrite := transactionsItem(ctx, cl, adm, cfg, txnID)
	return []Item{txn, checkpointTopicItem(ctx, adm, cfg, topicWrite)}
}

// transactionsItem checks that every broker supports transactions, that
// the cluster has a coordinator for txnID, and that the principal may
// describe and write txnID. It also returns what the write probe said
// about the checkpoint topic: nil when it may be written, or
// TOPIC_AUTHORIZATION_FAILED; nil too when nothing is known.
func transactionsItem(ctx context.Context, cl *kgo.Client, adm *kadm.Client, cfg config.Config, txnID string) (it Item, topicWrite error) {
	it.Name = "kafka transactions"
	fail := func(detail, fix string) (Item, error) {
		it.Status, it.Detail, it.Fix = Fail, detail, fix
		return it, nil
	}
	if detail, ok := transactionSupport(ctx, adm); !ok {
		return fail(detail, "use relay.delivery=at_least_once or a broker with transactions (Kafka 0.11+)")
	}
	if txnID == "" {
		it.Status = Warn
		it.Detail = "the brokers support transactions; the transactional id is derived from the database and its server (walrelay-<database>-<slot>-<system_identifier>), which are not known without a Postgres connection, so its permissions are not checked"
		it.Fix = "fix the Postgres connection (see its item), or set kafka.transactional_id"
		return it, nil
	}
	id := fmt.Sprintf("transactional id %q (%s)", txnID, txnIDSource(cfg))
	fix := txnACLFix(cfg, txnID)
	who := principal(cfg)

	fctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	coord, ok := adm.FindTxnCoordinators(fctx, txnID)[txnID]
	switch {
	case !ok:
		return fail(fmt.Sprintf("finding the transaction coordinator of %s: no answer", id), "")
	case errors.Is(coord.Err, kerr.TransactionalIDAuthorizationFailed):
		return fail(fmt.Sprintf("%s may not describe %s (FindCoordinator: %v)", who, id, coord.Err), fix)
	case coord.Err != nil:
		return fail(fmt.Sprintf("the cluster has no transaction coordinator for %s: %v", id, errWithMessage(coord.Err, coord.ErrMessage)),
			"check the brokers' transaction state log (__transaction_state): transaction.state.log.replication.factor and transaction.state.log.min.isr must not exceed the live brokers")
	}

	probe, err := probeTxnWrite(ctx, cl, txnID, cfg.Relay.CheckpointTopic)
	switch {
	case err != nil:
		it.Status = Warn
		it.Detail = fmt.Sprintf("the brokers support transactions and %s may describe %s; whether it may write it is unknown: %v", who, id, err)
		it.Fix = "if walrelay run fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: " + fix
		return it, nil
	case errors.Is(probe, kerr.TransactionalIDAuthorizationFailed):
		return fail(fmt.Sprintf("%s may describe %s but not write it (AddPartitionsToTxn: %v)", who, id, probe), fix)
	case errors.Is(probe, kerr.TopicAuthorizationFailed):
		topicWrite = probe // past the id's check: the id is fine
	case probe == nil, errors.Is(probe, kerr.InvalidProducerIDMapping), errors.Is(probe, kerr.UnknownTopicOrPartition):
		// The answers past both permission checks (the topic may not
		// exist yet: its own item says so).
	default:
		it.Status = Warn
		it.Detail = fmt.Sprintf("the brokers support transactions and %s may describe %s; checking that it may write it got %v", who, id, probe)
		it.Fix = "if walrelay run fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: " + fix
		return it, nil
	}
	it.Status = OK
	it.Detail = fmt.Sprintf("the brokers support transactions; %s may use %s, coordinator broker %d", who, id, coord.NodeID)
	return it, topicWrite
}

// transactionSupport reports whether every broker lists the requests a
// transactional producer sends, and if not, which broker lacks which.
func transactionSupport(ctx context.Context, adm *kadm.Client) (detail string, ok bool) {
	vctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	vs, err := adm.ApiVersions(vctx)
	if err != nil {
		return fmt.Sprintf("reading the brokers' API versions: %v", err), false
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Sprintf("broker %d did not list its API versions: %v", v.NodeID, v.Err), false
		}
		var lacks []string
		for _, k := range []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.EndTxn} {
			if _, has := v.KeyMaxVersion(int16(k)); !has {
				lacks = append(lacks, k.Name())
			}
		}
		if len(lacks) > 0 {
			return fmt.Sprintf("broker %d (%s) does not support transactions: it lacks %s", v.NodeID, v.VersionGuess(), strings.Join(lacks, ", ")), false
		}
	}
	return "", true
}

// probeTxnWrite asks txnID's coordinator to add partition 0 of topic to
// the transaction of a producer that does not exist, and returns the
// broker's answer: TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE on
// txnID, TOPIC_AUTHORIZATION_FAILED without WRITE on topic,
// UNKNOWN_TOPIC_OR_PARTITION when topic does not exist, else
// INVALID_PRODUCER_ID_MAPPING. Nothing about txnID changes. err is a
// request that failed.
func probeTxnWrite(ctx context.Context, cl *kgo.Client, txnID, topic string) (answer, err error) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID = noProducerID
	req.ProducerEpoch = -1
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0}
	req.Topics = append(req.Topics, rt)
	pctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	resp, err := req.RequestWith(pctx, cl)
	if err != nil {
		return nil, fmt.Errorf("AddPartitionsToTxn: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err, nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err, nil
			}
		}
	}
	return nil, nil
}

// checkpointTopicItem checks that relay.checkpoint_topic exists, compacted,
// or that walrelay may create it (one partition, cleanup.policy=compact),
// and that the principal may write it (topicWrite, from the probe).
func checkpointTopicItem(ctx context.Context, adm *kadm.Client, cfg config.Config, topicWrite error) Item {
	t := cfg.Relay.CheckpointTopic
	it := Item{Name: "checkpoint topic"}
	rwFix := fmt.Sprintf("grant %s READ, WRITE and DESCRIBE on Topic %s (walrelay writes a checkpoint in every transaction and reads the last one at start)", principal(cfg), t)
	fail := func(detail, fix string) Item {
		it.Status, it.Detail, it.Fix = Fail, detail, fix
		return it
	}
	lctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	details, err := adm.ListTopics(lctx, t)
	if err != nil {
		return fail(fmt.Sprintf("%s (relay.checkpoint_topic): describing it: %v", t, err), rwFix)
	}
	if topicWrite != nil {
		return fail(fmt.Sprintf("%s may not write %s (relay.checkpoint_topic): %v", principal(cfg), t, topicWrite), rwFix)
	}
	if !details.Has(t) {
		refused, err := validateCreate(ctx, adm, 1, cfg.Kafka.TopicReplicationFactor, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, []string{t})
		byHand := fmt.Sprintf("kafka-topics.sh --create --topic %s --partitions 1 --config cleanup.policy=compact", t)
		switch {
		case err != nil:
			return fail(fmt.Sprintf("%s (relay.checkpoint_topic) does not exist, and validating its creation failed: %v", t, err),
				fmt.Sprintf("create it (%s), or grant %s CREATE on Topic %s", byHand, principal(cfg), t))
		case refused[t] != "":
			return fail(fmt.Sprintf("%s (relay.checkpoint_topic) does not exist and the broker would refuse to create it: %s", t, refused[t]),
				fmt.Sprintf("create it (%s), or grant %s CREATE on Topic %s (and check kafka.topic_replication_factor)", byHand, principal(cfg), t))
		}
		it.Status = OK
		it.Detail = fmt.Sprintf("%s (relay.checkpoint_topic) does not exist yet; walrelay will create it with one partition, compacted", t)
		return it
	}

	parts := "1 partition"
	if n := len(details[t].Partitions); n != 1 {
		parts = fmt.Sprintf("%d partitions (walrelay reads all of them at start; it needs one)", n)
	}
	policy, err := cleanupPolicy(ctx, adm, t)
	switch {
	case err != nil:
		it.Status = Warn
		it.Detail = fmt.Sprintf("%s (relay.checkpoint_topic) exists with %s; its cleanup.policy could not be read: %v", t, parts, err)
		it.Fix = fmt.Sprintf("check it is compact (kafka-configs.sh --describe --entity-type topics --entity-name %s), or grant %s DESCRIBE_CONFIGS on Topic %s so check can", t, principal(cfg), t)
	case policy != "compact":
		it.Status = Warn
		it.Detail = fmt.Sprintf("%s (relay.checkpoint_topic) exists with %s and cleanup.policy=%s, not compact: it keeps every checkpoint instead of the last, and retention can delete the last one of a relay that wrote none since", t, parts, policy)
		it.Fix = fmt.Sprintf("kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact", t)
	default:
		it.Status = OK
		it.Detail = fmt.Sprintf("%s (relay.checkpoint_topic) exists with %s, compacted", t, parts)
	}
	return it
}

// cleanupPolicy reads topic's cleanup.policy (needs DESCRIBE_CONFIGS).
func cleanupPolicy(ctx context.Context, adm *kadm.Client, topic string) (string, error) {
	dctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(dctx, topic)
	if err != nil {
		return "", err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", err
	}
	if rc.Err != nil {
		return "", errWithMessage(rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			return c.MaybeValue(), nil
		}
	}
	return "", errors.New("the broker did not return cleanup.policy")
}

// txnIDSource says where the transactional id comes from.
func txnIDSource(cfg config.Config) string {
	if cfg.Kafka.TransactionalID != "" {
		return "kafka.transactional_id"
	}
	return "walrelay-<database>-<slot>-<system_identifier>"
}

// txnACLFix names the ACLs a transactional producer with txnID needs.
func txnACLFix(cfg config.Config, txnID string) string {
	return fmt.Sprintf("grant %s WRITE and DESCRIBE on TransactionalId %s (brokers before Kafka 2.8 also want IDEMPOTENT_WRITE on the cluster): "+
		"kafka-acls.sh --add --allow-principal %s --operation Write --operation Describe --transactional-id %s",
		principal(cfg), txnID, principalArg(cfg), txnID)
}

// principal names walrelay's Kafka principal for a fix.
func principal(cfg config.Config) string {
	if cfg.Kafka.SASL.Username == "" {
		return "walrelay's principal"
	}
	return "User:" + cfg.Kafka.SASL.Username
}

// principalArg is the principal for a kafka-acls.sh command line.
func principalArg(cfg config.Config) string {
	if cfg.Kafka.SASL.Username == "" {
		return "User:<walrelay's principal>"
	}
	return "User:" + cfg.Kafka.SASL.Username
}

// errWithMessage appends a broker's error message to its error code.
func errWithMessage(err error, msg string) error {
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}
