package publisher

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The caller's own records and topics: the fence record and the
// checkpoint of exactly-once delivery, and the checkpoint topic. They are
// not events: they do not go through Produce's topic preparation, hold-backs
// and per-record verdicts (Config.Done), but straight to franz-go, and the
// caller waits for their outcome, which it needs before it goes on (ending
// a Kafka transaction). Everything of the caller's reaches Kafka through
// the publisher, so one client and its options serve it all.

// ProduceSync produces r and waits for its outcome (nil once the broker
// acknowledged it). r is tied to ctx: franz-go fails it when ctx ends. For
// a record of the caller's own on a topic it prepared (Prepare); Config.Done
// is not called for it.
func (p *Publisher) ProduceSync(ctx context.Context, r *kgo.Record) error {
	return p.client.ProduceSync(ctx, r).FirstErr()
}

// ProduceAwait produces r and waits for its outcome (nil once the broker
// acknowledged it) or for ctx, whichever comes first: ctx's error then.
// Unlike ProduceSync, r is not tied to ctx: it stays buffered until the
// broker answers (or AbortBuffered fails it), so that a caller that stops
// waiting does not make franz-go fail a record of an open transaction
// under it; the transaction is then the caller's to abort. For a record
// of the caller's own on a topic it prepared (Prepare): exactly-once
// delivery's checkpoint, produced once every record of its transaction
// has its outcome. Config.Done is not called for it.
func (p *Publisher) ProduceAwait(ctx context.Context, r *kgo.Record) error {
	var perr error
	done := make(chan struct{})
	p.client.Produce(context.WithoutCancel(ctx), r, func(_ *kgo.Record, err error) {
		perr = err
		close(done)
	})
	select {
	case <-done:
		return perr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AbortBuffered fails every record franz-go buffers and has not yet sent
// (their outcome is an error: Config.Done for records given to Produce),
// and waits until none is in flight: what must happen before an open
// Kafka transaction can be aborted (EndTransaction) while some of its
// records have no outcome yet. Records the publisher itself holds back (a
// topic being prepared, records retried alone) are not aborted.
func (p *Publisher) AbortBuffered(ctx context.Context) error {
	if err := p.client.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("aborting buffered kafka records: %w", err)
	}
	return nil
}

// CreateTopic asks the brokers once to create topic with partitions,
// replicationFactor (-1: the broker's default) and configs, and returns
// their answer as it is: nil when created, or the Kafka error
// (kerr.TopicAlreadyExists, kerr.TopicAuthorizationFailed, ...) or the
// request's, which the caller wraps with what the topic is for. Unlike the topics Produce prepares (Config.CreateTopics,
// TopicPartitions, TopicConfigs), it is for a topic of the caller's own
// whose settings it decides (exactly-once delivery's compacted checkpoint
// topic); the caller decides what to retry.
func (p *Publisher) CreateTopic(ctx context.Context, topic string, partitions int32, replicationFactor int16, configs map[string]*string) error {
	resp, err := p.admin.CreateTopic(ctx, partitions, replicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}
