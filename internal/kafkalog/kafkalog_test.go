package kafkalog_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkalog"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// values reads topic with read and returns the values of the records.
func values(t *testing.T, ctx context.Context, read func(context.Context, string, []kgo.Opt, func(*kgo.Record)) (int, error), topic string, opts []kgo.Opt) ([]string, error) {
	t.Helper()
	var got []string
	_, err := read(ctx, topic, opts, func(r *kgo.Record) { got = append(got, string(r.Value)) })
	return got, err
}

// TestReadStableWaitsForOpenTransactions: a transaction another producer
// left open on the topic holds its last stable offset: ReadToEnd stops
// below it and misses what was committed after it; ReadStable waits, and
// when ctx ends first says which partition, offsets and producer hold it;
// once the transaction is aborted it reads every committed record written
// before it began, and none of the aborted ones.
func TestReadStableWaitsForOpenTransactions(t *testing.T) {
	b := testenv.Kafka(t)
	const topic = "log"
	b.CreateTopic(t, topic, 1)
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	commit := func(id, value string) {
		t.Helper()
		cl := b.Client(t, kgo.TransactionalID(id))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	commit("mine", "old")
	other := b.Client(t, kgo.TransactionalID("other"), kgo.TransactionTimeout(10*time.Minute))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte("other's")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit("mine", "new")

	got, err := values(t, t.Context(), kafkalog.ReadToEnd, topic, opts)
	if err != nil || !slices.Equal(got, []string{"old"}) {
		t.Fatalf("ReadToEnd = %q, %v; want [old] (it stops at the last stable offset)", got, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	got, err = values(t, ctx, kafkalog.ReadStable, topic, opts)
	var held *kafkalog.HeldError
	if !errors.As(err, &held) || !errors.Is(err, kafkalog.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadStable with the other transaction open = %q, %v; want a *HeldError wrapping ErrHeld and the deadline", got, err)
	}
	t.Logf("ReadStable: %v", err)
	// Offsets: old 0, its commit marker 1, other's 2, new 3, its marker 4.
	if held.Topic != topic || held.Partition != 0 || held.Stable != 2 || held.End != 5 {
		t.Errorf("held = %+v, want partition 0 stable at 2 below end 5", held)
	}
	if len(held.Open) != 1 || held.Open[0].TransactionalID != "other" || held.Open[0].StartOffset != 2 {
		t.Errorf("held.Open = %+v, want the other producer's transaction from offset 2", held.Open)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err = values(t, t.Context(), kafkalog.ReadStable, topic, opts)
	}()
	time.Sleep(300 * time.Millisecond) // the read waits meanwhile
	if err := other.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil || !slices.Equal(got, []string{"old", "new"}) {
		t.Fatalf("ReadStable after the abort = %q, %v; want [old new]", got, err)
	}
}
