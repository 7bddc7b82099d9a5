package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/router"
)

// republisher produces missing rows again with the relay's producer
// (internal/publisher: idempotent, acks=all, murmur2 key partitioning, the
// partition placement honoured, topics prepared as the relay prepares
// them).
type republisher struct {
	pub  *publisher.Publisher
	sent int

	mu     sync.Mutex
	acked  int
	failed []string
}

// maxBuffered bounds the records republish holds unacknowledged; Produce
// waits beyond it.
const maxBuffered = 10_000

// republish produces msg (the route of a missing row whose time column is
// at) with the republished header and at as its timestamp. msg's bytes
// are copied: the router reuses them.
func (v *verifier) republish(ctx context.Context, msg *router.Message, at time.Time) error {
	if v.repub == nil {
		r, err := newRepublisher(v)
		if err != nil {
			return err
		}
		v.repub = r
	}
	rec := &kgo.Record{
		Topic:     msg.Topic,
		Key:       clone(msg.Key),
		Value:     clone(msg.Value),
		Timestamp: at,
		Headers:   make([]kgo.RecordHeader, 0, len(msg.Headers)+1),
	}
	for _, h := range msg.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: clone(h.Value)})
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderRepublished, Value: []byte("true")})
	if msg.HasPartition {
		publisher.SetPartition(rec, msg.Partition)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("republishing: %w", err)
	}
	v.repub.sent++
	v.repub.pub.Produce(rec)
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func newRepublisher(v *verifier) (*republisher, error) {
	log := v.log.With("component", "republish")
	cfg, err := kafkaconf.PublisherConfig(v.cfg.Kafka, kafkaconf.Options{Log: log})
	if err != nil {
		return nil, err
	}
	r := &republisher{failed: []string{}}
	cfg.Done = r.done
	cfg.MaxBufferedRecords = maxBuffered
	if r.pub, err = publisher.New(cfg, log); err != nil {
		return nil, err
	}
	return r, nil
}

// done is the publisher's verdict on one record.
func (r *republisher) done(rec *kgo.Record, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.acked++
		return
	}
	id, _ := headerOf(rec, headerEventID)
	r.failed = append(r.failed, fmt.Sprintf("%s: %v", id, err))
}

// finish waits for every record's verdict and closes the producer.
func (r *republisher) finish(ctx context.Context) (*Republished, error) {
	defer r.pub.Close()
	if err := r.pub.Flush(ctx); err != nil {
		return nil, fmt.Errorf("republishing: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Republished{Sent: r.sent, Acknowledged: r.acked, Failed: r.failed}, nil
}
