package dbzoffset_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/dbzoffset"
	"github.com/walrelay/walrelay/internal/testenv"
)

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// offsetsTopic is a Connect offsets topic on a kfake broker: 25
// partitions (offset.storage.partitions' default), records partitioned by
// key as Connect's producer does.
type offsetsTopic struct {
	broker *testenv.Broker
	name   string
}

func newOffsetsTopic(t *testing.T) *offsetsTopic {
	t.Helper()
	o := &offsetsTopic{broker: testenv.Kafka(t, kfake.SeedTopics(25, "connect-offsets")), name: "connect-offsets"}
	return o
}

// write produces records (key, value; a nil value is a tombstone) in
// order and waits for their acks.
func (o *offsetsTopic) write(t *testing.T, kvs ...[2]string) {
	t.Helper()
	cl := o.broker.Client(t, kgo.DefaultProduceTopic(o.name))
	for _, kv := range kvs {
		r := &kgo.Record{Key: []byte(kv[0])}
		if kv[1] != "" {
			r.Value = []byte(kv[1])
		}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatalf("producing to %s: %v", o.name, err)
		}
	}
}

func (o *offsetsTopic) read(t *testing.T, connector, server string) (dbzoffset.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return dbzoffset.Read(ctx, o.name, connector, server, kgo.SeedBrokers(o.broker.Addrs()...))
}

const (
	keyA      = `["outbox-connector",{"server":"dbserver1"}]`
	keyB      = `["outbox-connector",{"server":"dbserver2"}]`
	keyOther  = `["inventory-connector",{"server":"dbserver1"}]`
	keyMySQL  = `["mysql-connector",{"server":"m1"}]`
	keySpaced = `[ "outbox-connector", { "server": "dbserver1" } ]`
)

// The last record of the key wins; other connectors' records, other
// kinds of keys and the byte form of the key do not matter.
func TestReadLastRecordWins(t *testing.T) {
	o := newOffsetsTopic(t)
	o.write(t,
		[2]string{keyA, commitValue},
		[2]string{keyOther, oldValue},
		[2]string{keyMySQL, `{"file":"mysql-bin.000003","pos":154}`},
		[2]string{keyA, oldValue},
		[2]string{keyA, insertValue},
		[2]string{keyOther, commitValue},
	)
	for _, server := range []string{"dbserver1", ""} {
		rec, err := o.read(t, "outbox-connector", server)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Value) != insertValue || rec.Offset.LSN != 24023600 || rec.Key != (dbzoffset.Key{Connector: "outbox-connector", Server: "dbserver1"}) {
			t.Errorf("Read(server %q) = %+v %s, want the last record %s", server, rec, rec.Value, insertValue)
		}
	}

	// A key written with other whitespace is the same key.
	o = newOffsetsTopic(t)
	o.write(t, [2]string{keySpaced, commitValue})
	if rec, err := o.read(t, "outbox-connector", "dbserver1"); err != nil || string(rec.Value) != commitValue {
		t.Errorf("Read of a key with spaces = %+v, %v; want its offset", rec, err)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		records   [][2]string
		server    string
		sentinel  error
		substring []string
	}{
		{"no offset", [][2]string{{keyOther, commitValue}}, "dbserver1", dbzoffset.ErrNoOffset,
			[]string{`no record with key ["outbox-connector",{"server":"dbserver1"}]`, "--connector", "--offsets-topic"}},
		{"empty topic", nil, "", dbzoffset.ErrNoOffset, []string{`["outbox-connector",{"server":…}]`}},
		{"tombstone", [][2]string{{keyA, insertValue}, {keyA, ""}}, "dbserver1", dbzoffset.ErrOffsetReset,
			[]string{"tombstone", "offset was deleted"}},
		{"tombstone, prefix omitted", [][2]string{{keyA, insertValue}, {keyA, ""}}, "", dbzoffset.ErrOffsetReset, nil},
		{"several prefixes", [][2]string{{keyA, insertValue}, {keyB, commitValue}}, "", dbzoffset.ErrAmbiguous,
			[]string{`"dbserver1", "dbserver2"`, "--topic-prefix"}},
		{"not an offset", [][2]string{{keyA, `"lsn"`}}, "dbserver1", dbzoffset.ErrMalformed, []string{"partition", "offset 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOffsetsTopic(t)
			o.write(t, tc.records...)
			rec, err := o.read(t, "outbox-connector", tc.server)
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("Read = %+v, %v; want %v", rec, err, tc.sentinel)
			}
			for _, s := range tc.substring {
				if !contains(err, s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}

	// With several prefixes, naming one picks it; a tombstone of another
	// does not matter.
	o := newOffsetsTopic(t)
	o.write(t, [2]string{keyA, insertValue}, [2]string{keyB, commitValue}, [2]string{keyB, ""})
	if rec, err := o.read(t, "outbox-connector", ""); err != nil || rec.Key.Server != "dbserver1" {
		t.Errorf("Read with dbserver2 reset = %+v, %v; want dbserver1's offset", rec, err)
	}

	t.Run("no topic", func(t *testing.T) {
		broker := testenv.Kafka(t)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := dbzoffset.Read(ctx, "my_connect_offsets", "outbox-connector", "", kgo.SeedBrokers(broker.Addrs()...))
		if !errors.Is(err, dbzoffset.ErrNoTopic) || !contains(err, `"my_connect_offsets"`) {
			t.Errorf("Read of a missing topic = %v, want ErrNoTopic naming it", err)
		}
	})
}
