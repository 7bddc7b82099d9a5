// Package verify checks what landed on Kafka against what Postgres
// committed, for walrelay's fault-injection suite (internal/faultsuite).
//
// In: the ledger of committed outbox events (id, aggregate key, per-key
// version, a digest of the payload, written in the same transaction as the
// event so the ledger is exactly what committed), the ids of rolled-back
// events, and the records read back from Kafka (id header, key, a digest
// of the value, topic, partition, offset, producer id; dead-letter copies
// flagged). Out: a Report counting committed, delivered (distinct), lost,
// duplicate, invented, misrouted and corrupted records and per-key order
// violations of first occurrences, plus samples of each problem for the
// failure message.
//
// At-least-once delivery allows duplicates, so Check counts them and
// Report.Err never calls them an error; what it calls errors are: a
// committed event missing, a record whose id no committed event has (a
// rolled-back event, or garbage), a record under another key than its
// event's, a record whose value is not its event's payload, and, per key,
// first occurrences out of commit (version) order or spread over
// partitions. Exactly-once delivery promises a read_committed consumer
// every event once: Report.ErrExactlyOnce adds duplicates to those errors.
//
// ProducerInterleavings checks a different property: that two relay
// instances never published at the same time. A producer is a producer id
// and epoch: with exactly-once delivery every walrelay process of a slot
// has the same transactional id, so the same producer id, and a new
// process fences the older ones by bumping the epoch.
//
// It does not read Kafka or Postgres: the suite does.
package verify

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Event is one committed outbox event from the ledger.
type Event struct {
	// ID is the outbox id (Kafka header id).
	ID string
	// Key is the aggregate id (the Kafka record key).
	Key string
	// Version is the event's position in its key's commit order, from 1.
	// 0 means the event takes no part in the order check (a poison row
	// expected on the dead-letter topic).
	Version int
	// Digest identifies the payload (the suite uses its md5 in hex), to
	// compare with the records' values; "" leaves them unchecked.
	Digest string
}

// Record is one record read from Kafka.
type Record struct {
	ID        string // header id, or walrelay.outbox.id on a dead-letter record
	Key       string
	Digest    string // of the value, as Event.Digest; not compared on a dead-letter record
	Topic     string
	Partition int32
	Offset    int64
	// ProducerID and ProducerEpoch are the producer that wrote the
	// record's batch (kgo.Record's fields of the same names).
	ProducerID    int64
	ProducerEpoch int16
	// DeadLetter marks a record read from the dead-letter topic: it counts
	// as a delivery of its event but takes no part in key and order checks.
	DeadLetter bool
}

// maxSamples bounds the examples kept per problem.
const maxSamples = 10

// Report is the outcome of Check.
type Report struct {
	Committed       int // events in the ledger
	Delivered       int // distinct committed events found on Kafka
	DeadLettered    int // of Delivered, those found only on the dead-letter topic
	Lost            int // committed events not found
	Duplicates      int // records beyond the first of each committed event
	Invented        int // records whose id is no committed event's
	RolledBack      int // of Invented, records of rolled-back events
	Misrouted       int // first occurrences under a key other than the event's
	Corrupted       int // records (any copy) whose value's digest is not the event's
	OrderViolations int // first occurrences out of per-key commit order or on a second partition

	// Samples of each problem, at most maxSamples each.
	LostIDs      []string
	InventedIDs  []string
	DuplicateIDs []string // "id (topic[partition]@offset)" of a copy beyond the first
	Problems     []string // misrouted records and order violations
}

// Err returns nil when nothing was lost, invented, misrouted or reordered,
// and otherwise an error describing the counts and samples. Duplicates are
// never an error.
func (r Report) Err() error {
	if r.Lost == 0 && r.Invented == 0 && r.Misrouted == 0 && r.Corrupted == 0 && r.OrderViolations == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "verify: %d committed, %d delivered, %d lost, %d invented (%d rolled back), %d misrouted, %d corrupted, %d order violations",
		r.Committed, r.Delivered, r.Lost, r.Invented, r.RolledBack, r.Misrouted, r.Corrupted, r.OrderViolations)
	if len(r.LostIDs) > 0 {
		fmt.Fprintf(&b, "; lost e.g. %s", strings.Join(r.LostIDs, ", "))
	}
	if len(r.InventedIDs) > 0 {
		fmt.Fprintf(&b, "; invented e.g. %s", strings.Join(r.InventedIDs, ", "))
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "; %s", p)
	}
	return errors.New(b.String())
}

// ErrExactlyOnce is Err for exactly-once delivery as a read_committed
// consumer sees it: duplicates are an error too.
func (r Report) ErrExactlyOnce() error {
	err := r.Err()
	if r.Duplicates == 0 {
		return err
	}
	dup := fmt.Errorf("verify: %d duplicates under exactly-once delivery, e.g. %s", r.Duplicates, strings.Join(r.DuplicateIDs, ", "))
	return errors.Join(err, dup)
}

// String is a one-line summary.
func (r Report) String() string {
	return fmt.Sprintf("committed=%d delivered=%d (dead-lettered %d) lost=%d duplicates=%d invented=%d misrouted=%d corrupted=%d order_violations=%d",
		r.Committed, r.Delivered, r.DeadLettered, r.Lost, r.Duplicates, r.Invented, r.Misrouted, r.Corrupted, r.OrderViolations)
}

// Check compares records with the ledger. Records may come in any order:
// Check sorts them by topic, partition and offset (the order a consumer of
// one partition sees). Ledger ids must be unique; a duplicate ledger id is
// reported as a problem.
func Check(ledger []Event, rolledBack []string, records []Record) Report {
	rep := Report{Committed: len(ledger)}
	events := make(map[string]Event, len(ledger))
	for _, e := range ledger {
		if _, dup := events[e.ID]; dup {
			rep.OrderViolations++
			rep.sample(&rep.Problems, fmt.Sprintf("ledger lists event %s twice", e.ID))
		}
		events[e.ID] = e
	}
	aborted := make(map[string]bool, len(rolledBack))
	for _, id := range rolledBack {
		aborted[id] = true
	}

	recs := sortedByPlace(records)

	seen := make(map[string]bool, len(ledger))
	onlyDLQ := make(map[string]bool)
	type place struct {
		topic     string
		partition int32
	}
	placeOf := make(map[string]place)
	lastVersion := make(map[string]int)
	for _, r := range recs {
		e, ok := events[r.ID]
		if !ok {
			rep.Invented++
			if aborted[r.ID] {
				rep.RolledBack++
			}
			rep.sample(&rep.InventedIDs, fmt.Sprintf("%s (%s[%d]@%d)", r.ID, r.Topic, r.Partition, r.Offset))
			continue
		}
		if !r.DeadLetter && e.Digest != "" && r.Digest != e.Digest {
			rep.Corrupted++
			rep.sample(&rep.Problems, fmt.Sprintf("event %s at %s[%d]@%d has a value with digest %s, want %s", r.ID, r.Topic, r.Partition, r.Offset, r.Digest, e.Digest))
		}
		if seen[r.ID] {
			rep.Duplicates++
			rep.sample(&rep.DuplicateIDs, fmt.Sprintf("%s (%s[%d]@%d)", r.ID, r.Topic, r.Partition, r.Offset))
			if !r.DeadLetter {
				delete(onlyDLQ, r.ID)
			}
			continue
		}
		seen[r.ID] = true
		if r.DeadLetter {
			onlyDLQ[r.ID] = true
			continue
		}
		if r.Key != e.Key {
			rep.Misrouted++
			rep.sample(&rep.Problems, fmt.Sprintf("event %s has key %q on %s[%d]@%d, want %q", r.ID, r.Key, r.Topic, r.Partition, r.Offset, e.Key))
			continue
		}
		if e.Version == 0 {
			continue
		}
		p := place{r.Topic, r.Partition}
		if prev, ok := placeOf[e.Key]; ok && prev != p {
			rep.OrderViolations++
			rep.sample(&rep.Problems, fmt.Sprintf("key %q on %s[%d] and %s[%d]", e.Key, prev.topic, prev.partition, p.topic, p.partition))
			continue
		}
		placeOf[e.Key] = p
		if last := lastVersion[e.Key]; e.Version <= last {
			rep.OrderViolations++
			rep.sample(&rep.Problems, fmt.Sprintf("key %q: version %d (event %s at %s[%d]@%d) first seen after version %d", e.Key, e.Version, r.ID, r.Topic, r.Partition, r.Offset, last))
			continue
		}
		lastVersion[e.Key] = e.Version
	}
	rep.Delivered = len(seen)
	rep.DeadLettered = len(onlyDLQ)
	for _, id := range slices.Sorted(maps.Keys(events)) {
		if !seen[id] {
			rep.Lost++
			rep.sample(&rep.LostIDs, id)
		}
	}
	return rep
}

func (r *Report) sample(list *[]string, s string) {
	if len(*list) < maxSamples {
		*list = append(*list, s)
	}
}

// Producer identifies who wrote a record: a producer id and its epoch.
// Idempotent producers get a new id per process (epoch 0); transactional
// ones keep the transactional id's producer id and bump the epoch.
type Producer struct {
	ID    int64
	Epoch int16
}

func (p Producer) String() string { return fmt.Sprintf("%d/%d", p.ID, p.Epoch) }

// ProducerOf is the producer that wrote r.
func ProducerOf(r Record) Producer { return Producer{r.ProducerID, r.ProducerEpoch} }

// ProducerInterleavings reports, per partition, every place where a
// producer (id and epoch) reappears after another producer wrote in
// between: two instances publishing at the same time. With one active
// instance at a time (each new process is a new producer id, or with
// exactly-once delivery a new epoch of the same one), each partition's
// producers form contiguous blocks. Dead-letter records are included: they
// are published by the same producer. Records may come in any order.
func ProducerInterleavings(records []Record) []string {
	recs := sortedByPlace(records)
	var out []string
	for i := 0; i < len(recs); {
		j := i
		for j < len(recs) && recs[j].Topic == recs[i].Topic && recs[j].Partition == recs[i].Partition {
			j++
		}
		done := map[Producer]bool{}
		for k := i + 1; k < j; k++ {
			cur, prev := ProducerOf(recs[k]), ProducerOf(recs[k-1])
			if cur == prev {
				continue
			}
			done[prev] = true
			if done[cur] {
				out = append(out, fmt.Sprintf("%s[%d]@%d: producer %s writes again after producer %s",
					recs[k].Topic, recs[k].Partition, recs[k].Offset, cur, prev))
			}
		}
		i = j
	}
	return out
}

// ProducerBlocks returns, per "topic[partition]", the producers in the
// order their blocks appear; for reports.
func ProducerBlocks(records []Record) map[string][]Producer {
	out := map[string][]Producer{}
	for _, r := range sortedByPlace(records) {
		k := fmt.Sprintf("%s[%d]", r.Topic, r.Partition)
		if b := out[k]; len(b) == 0 || b[len(b)-1] != ProducerOf(r) {
			out[k] = append(b, ProducerOf(r))
		}
	}
	return out
}

// sortedByPlace returns a copy of records sorted by topic, partition and
// offset.
func sortedByPlace(records []Record) []Record {
	recs := slices.Clone(records)
	slices.SortStableFunc(recs, func(a, b Record) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return recs
}
