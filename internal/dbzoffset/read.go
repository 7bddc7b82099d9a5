package dbzoffset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkalog"
)

// Record is the connector's last committed offset and where it was read.
type Record struct {
	Key       Key
	Offset    Offset
	Value     []byte // the value's bytes, as stored
	Partition int32
	At        int64     // the record's offset in its partition
	Time      time.Time // the record's timestamp
}

// Read reads the offsets topic to its end and returns the last offset of
// the connector named connector for topic prefix server. With server ""
// the connector must have offsets for exactly one prefix (ErrAmbiguous
// lists them otherwise). It fails with ErrNoOffset when no record of the
// connector is found, ErrOffsetReset when the last one is a tombstone and
// ErrNoTopic when the topic does not exist. opts configure the client
// (seed brokers, TLS, SASL); Read adds what it needs to consume.
//
// Like Connect's KafkaBasedLog.readToEnd it reads every partition from its
// start to the end offset listed when it began, with read_committed
// isolation (exactly-once source workers write offsets in transactions);
// control records are kept so a partition ending in a transaction marker
// is known to be read to its end.
func Read(ctx context.Context, topic, connector, server string, opts ...kgo.Opt) (Record, error) {
	// The last record of each key, per partition.
	type found struct {
		rec       Record
		tombstone bool
	}
	last := map[Key]map[int32]found{}
	partitions, err := kafkalog.ReadToEnd(ctx, topic, opts, func(r *kgo.Record) {
		k, ok := ParseKey(r.Key)
		if !ok || k.Connector != connector || (server != "" && k.Server != server) {
			return
		}
		if last[k] == nil {
			last[k] = map[int32]found{}
		}
		last[k][r.Partition] = found{
			rec:       Record{Key: k, Value: r.Value, Partition: r.Partition, At: r.Offset, Time: r.Timestamp},
			tombstone: r.Value == nil,
		}
	})
	if errors.Is(err, kafkalog.ErrNoTopic) {
		return Record{}, fmt.Errorf("%w: %q: name the topic of the Connect worker's offset.storage.topic with --offsets-topic", ErrNoTopic, topic)
	}
	if err != nil {
		return Record{}, fmt.Errorf("reading offsets topic: %w", err)
	}

	want := Key{Connector: connector, Server: server}.String()
	if server == "" {
		want = fmt.Sprintf(`["%s",{"server":…}]`, connector)
	}
	var live []Key
	var reset *found
	for k, byPartition := range last {
		if len(byPartition) > 1 {
			return Record{}, fmt.Errorf("%w: offsets topic %q holds key %s in %d partitions; Connect writes a key to one partition: was the topic written by something else?", ErrAmbiguous, topic, k, len(byPartition))
		}
		for _, f := range byPartition {
			if f.tombstone {
				reset = &f
			} else {
				live = append(live, k)
			}
		}
	}
	switch {
	case len(live) == 0 && reset != nil:
		return Record{}, fmt.Errorf("%w: the last record for %s in offsets topic %q (partition %d, offset %d) is a tombstone: the offset was deleted, and Debezium would start over (a new snapshot, or the slot's position)", ErrOffsetReset, reset.rec.Key, topic, reset.rec.Partition, reset.rec.At)
	case len(live) == 0:
		return Record{}, fmt.Errorf("%w: offsets topic %q (%d partition(s)) has no record with key %s: check --connector (the connector's name), --topic-prefix and --offsets-topic (Connect's offset.storage.topic)", ErrNoOffset, topic, partitions, want)
	case len(live) > 1:
		var names []string
		for _, k := range live {
			names = append(names, fmt.Sprintf("%q", k.Server))
		}
		slices.Sort(names)
		return Record{}, fmt.Errorf("%w: connector %q has offsets for topic prefixes %s: pick one with --topic-prefix", ErrAmbiguous, connector, strings.Join(names, ", "))
	}
	var rec Record
	for _, f := range last[live[0]] {
		rec = f.rec
	}
	if rec.Offset, err = Parse(rec.Value); err != nil {
		return Record{}, fmt.Errorf("offset of %s in offsets topic %q (partition %d, offset %d): %w", rec.Key, topic, rec.Partition, rec.At, err)
	}
	return rec, nil
}
