package publisher

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// The partition of a keyed record is toPositive(murmur2(key)) % n, as in
// Kafka's BuiltInPartitioner.partitionForKey, for any partition count.
func TestPartitionerMatchesKafkaMurmur2(t *testing.T) {
	tp := newPartitioner(nil).ForTopic("orders")
	for _, v := range testenv.Murmur2Vectors {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 10, 12, 16, 31, 64, 100, 1000} {
			t.Run(fmt.Sprintf("%s/n=%d", v.Key, n), func(t *testing.T) {
				want := int(testenv.KafkaPartition(v.Key, int32(n)))
				r := &kgo.Record{Topic: "orders", Key: v.Key}
				if got := tp.Partition(r, n); got != want {
					t.Fatalf("Partition(%q, %d) = %d, Kafka's Java client picks %d", v.Key, n, got, want)
				}
			})
		}
	}
	// Many more keys, checked against the independent transcription
	// (testenv.Murmur2, itself checked against Kafka's vectors).
	for i := range 2000 {
		key := []byte(fmt.Sprintf("aggregate-%d", i))
		n := 1 + i%37
		want := int(testenv.KafkaPartition(key, int32(n)))
		if got := tp.Partition(&kgo.Record{Key: key}, n); got != want {
			t.Fatalf("Partition(%q, %d) = %d, want %d", key, n, got, want)
		}
	}
}

func TestSetPartitionOverridesHashing(t *testing.T) {
	tp := newPartitioner(nil).ForTopic("orders")
	key := []byte("foobar")
	hashed := testenv.KafkaPartition(key, 8)
	for p := range int32(8) {
		r := &kgo.Record{Topic: "orders", Key: key}
		SetPartition(r, p)
		if got := tp.Partition(r, 8); got != int(p) {
			t.Errorf("SetPartition(%d) with key %q (hash partition %d): Partition = %d", p, key, hashed, got)
		}
		if !tp.RequiresConsistency(r) {
			t.Errorf("manually placed record on %d: RequiresConsistency = false", p)
		}
	}
	// An unkeyed manual record too.
	r := &kgo.Record{Topic: "orders"}
	SetPartition(r, 5)
	if got := tp.Partition(r, 8); got != 5 {
		t.Errorf("unkeyed SetPartition(5): Partition = %d", got)
	}
	if !tp.RequiresConsistency(r) {
		t.Errorf("unkeyed manually placed record: RequiresConsistency = false")
	}
}

func TestRequiresConsistency(t *testing.T) {
	tp := newPartitioner(nil).ForTopic("orders")
	cases := []struct {
		name string
		rec  func() *kgo.Record
		want bool
	}{
		{"keyed", func() *kgo.Record { return &kgo.Record{Key: []byte("order-1")} }, true},
		{"manual", func() *kgo.Record { r := &kgo.Record{}; SetPartition(r, 0); return r }, true},
		{"unkeyed", func() *kgo.Record { return &kgo.Record{Value: []byte("x")} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tp.RequiresConsistency(c.rec()); got != c.want {
				t.Fatalf("RequiresConsistency = %t, want %t", got, c.want)
			}
		})
	}
}
