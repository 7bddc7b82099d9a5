package relay

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/replication"
)

// A refused record's bytes may be in a receive buffer the record lets go
// of once its refusal is handled; the stream then reads other rows into
// it. The dead letter, built later by the dead-letter worker, must carry
// the refused row's value and headers, not what the buffer holds by then.
func TestDeadLetterCopiesTheRefusedRecord(t *testing.T) {
	cfg := config.Default()
	cfg.Kafka.Brokers = []string{"127.0.0.1:1"} // never contacted
	r, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.pub.Close()
	wire := []byte("VALUE-OF-ROW-1|header-of-row-1") // the receive buffer's bytes
	in := replication.NewBuffer()
	if !in.Hold() {
		t.Fatal("a new buffer refused a hold")
	}
	tx := r.tracker.Begin()
	out := &outRecord{held: in, lsn: 42, table: "public.outbox", tx: tx, size: 10}
	r.tracker.Add(tx, out.size)
	out.rec = kgo.Record{Topic: "outbox.event.t", Key: wire[:5], Value: wire[:14],
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("e1")}, {Key: "eventType", Value: wire[15:]}}, Context: out}
	r.onProduced(&out.rec, fmt.Errorf("%w: test", publisher.ErrRecordTooLarge))
	copy(wire, "OTHER-ROW-BYTES|the-next-row-hdr") // the stream reads the next rows into the buffer

	job := <-r.deadLetters
	rec := job.letter.Record(cfg.Relay.DeadLetterTopic, true)
	if string(rec.Value) != "VALUE-OF-ROW-1" {
		t.Errorf("dead letter value %q, want the refused row's %q", rec.Value, "VALUE-OF-ROW-1")
	}
	if got := string(rec.Headers[1].Value); rec.Headers[1].Key != "eventType" || got != "header-of-row-1" {
		t.Errorf("dead letter header %s=%q, want eventType=%q", rec.Headers[1].Key, got, "header-of-row-1")
	}
}
