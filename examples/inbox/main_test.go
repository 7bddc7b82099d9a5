package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// envChild makes the test binary act as the example: TestMain runs the
// command line after "--" instead of the tests.
const envChild = "INBOX_EXAMPLE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		if err := run(context.Background(), args, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "inbox:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

const topic = "outbox.event.order"

// TestKillBetweenDatabaseAndOffsetCommit kills the example (kill -9) when
// its first offset commit reaches the broker, that is after the database
// committed the batch's effects and before Kafka recorded the offsets.
// A second consumer of the same group reads those records again and the
// inbox skips them: every event counted exactly once.
func TestKillBetweenDatabaseAndOffsetCommit(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	broker := testenv.Kafka(t, kfake.SeedTopics(2, topic))
	const orders, perOrder = 5, 6
	var recs []*kgo.Record
	for i := range orders * perOrder {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i%orders), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: "id", Value: fmt.Appendf(nil, "evt-%02d", i)}, {Key: "eventType", Value: []byte("OrderNoted")}}})
	}
	if err := broker.Client(t).ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	args := []string{"--", "-dsn", dsn, "-brokers", strings.Join(broker.Addrs(), ","), "-group", "g", "-topic", topic, "-session-timeout", "6s"}
	var stderr testenv.SyncBuffer
	child := exec.Command(os.Args[0], args...)
	child.Env = append(os.Environ(), envChild+"=1")
	child.Stdout, child.Stderr = &stderr, &stderr
	var killed atomic.Bool
	started := make(chan *exec.Cmd, 1) // hands the started child to the broker's goroutine
	broker.Cluster.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		c := <-started
		_ = c.Process.Kill() // SIGKILL
		_ = c.Wait()
		killed.Store(true)
		return nil, errors.New("consumer killed before its offset commit"), true // the commit never happens
	})
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	started <- child
	t.Cleanup(func() {
		if !killed.Load() {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !killed.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("the example made no offset commit within 30s; its log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	applied := testenv.QueryValue[int64](t, dsn, `SELECT count(*) FROM inbox`) // what the killed process committed
	if applied == 0 {
		t.Fatalf("the example committed offsets before applying anything; its log:\n%s", stderr.String())
	}
	adm := kadm.NewClient(broker.Client(t))
	if offs, err := adm.FetchOffsets(t.Context(), "g"); err == nil && len(offs.Offsets()) > 0 {
		t.Fatalf("the group has committed offsets %v although the only commit was refused", offs)
	}

	// The same group again: every record is read again.
	var stderr2 testenv.SyncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-dsn", dsn, "-brokers", strings.Join(broker.Addrs(), ","), "-group", "g", "-topic", topic}, &stderr2)
	}()
	for !committedAll(t, adm, "g") {
		select {
		case err := <-errc:
			t.Fatalf("the second consumer stopped: %v; its log:\n%s", err, stderr2.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the second consumer did not commit every offset; its log:\n%s", stderr2.String())
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	counts := testenv.QueryValue[string](t, dsn, `SELECT string_agg(aggregate_id || '=' || events, ' ' ORDER BY aggregate_id) FROM aggregate_events`)
	if want := "order-0=6 order-1=6 order-2=6 order-3=6 order-4=6"; counts != want {
		t.Errorf("events counted per order: %s, want %s (each once)", counts, want)
	}
	if skipped := strings.Count(stderr2.String(), "processed before; skipped"); int64(skipped) != applied {
		t.Errorf("the second consumer skipped %d events, want the %d the killed one applied", skipped, applied)
	}
	t.Logf("killed after applying %d of %d events; the same group read them again, skipped those and applied the rest", applied, orders*perOrder)
}

// committedAll says whether group committed the end offset of every
// partition of the topic.
func committedAll(t *testing.T, adm *kadm.Client, group string) bool {
	t.Helper()
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(t.Context(), group)
	if err != nil {
		return false
	}
	all := true
	ends.Each(func(o kadm.ListedOffset) {
		if c, ok := committed.Lookup(o.Topic, o.Partition); o.Offset > 0 && (!ok || c.At < o.Offset) {
			all = false
		}
	})
	return all
}
