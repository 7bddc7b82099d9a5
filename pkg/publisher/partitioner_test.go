package publisher

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// javaMurmur2 is an independent transcription of Kafka's
// org.apache.kafka.common.utils.Utils.murmur2, written with Java's int32
// arithmetic, so the partitioner is checked against Kafka rather than
// against franz-go's own copy.
func javaMurmur2(data []byte) int32 {
	const (
		seed int32 = -1756908916 // 0x9747b28c as a Java int
		m    int32 = 0x5bd1e995
		r          = 24
	)
	length := len(data)
	h := seed ^ int32(length)
	for i := 0; i < length/4; i++ {
		i4 := i * 4
		k := int32(data[i4]) | int32(data[i4+1])<<8 | int32(data[i4+2])<<16 | int32(data[i4+3])<<24
		k *= m
		k ^= int32(uint32(k) >> r)
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= int32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= int32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= int32(data[tail])
		h *= m
	}
	h ^= int32(uint32(h) >> 13)
	h *= m
	h ^= int32(uint32(h) >> 15)
	return h
}

// Kafka's UtilsTest.testMurmur2 vectors (signed Java ints).
var murmur2Vectors = []struct {
	name string
	key  []byte
	want int32
}{
	{"21", []byte("21"), -973932308},
	{"foobar", []byte("foobar"), -790332482},
	{"a-little-bit-long-string", []byte("a-little-bit-long-string"), -985981536},
	{"a-little-bit-longer-string", []byte("a-little-bit-longer-string"), -1486304829},
	{"lkjh...h8", []byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
	{"abc bytes", []byte{'a', 'b', 'c'}, 479470107},
}

func TestJavaMurmur2MatchesKafkaVectors(t *testing.T) {
	for _, v := range murmur2Vectors {
		t.Run(v.name, func(t *testing.T) {
			if got := javaMurmur2(v.key); got != v.want {
				t.Fatalf("murmur2(%q) = %d, Kafka says %d", v.key, got, v.want)
			}
		})
	}
}

// The partition of a keyed record is toPositive(murmur2(key)) % n, as in
// Kafka's BuiltInPartitioner.partitionForKey, for any partition count.
func TestPartitionerMatchesKafkaMurmur2(t *testing.T) {
	tp := newPartitioner(nil).ForTopic("orders")
	for _, v := range murmur2Vectors {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 10, 12, 16, 31, 64, 100, 1000} {
			t.Run(fmt.Sprintf("%s/n=%d", v.name, n), func(t *testing.T) {
				want := int(v.want&0x7fffffff) % n
				r := &kgo.Record{Topic: "orders", Key: v.key}
				if got := tp.Partition(r, n); got != want {
					t.Fatalf("Partition(%q, %d) = %d, Kafka's Java client picks %d", v.key, n, got, want)
				}
			})
		}
	}
	// Many more keys, checked against the independent transcription.
	for i := range 2000 {
		key := []byte(fmt.Sprintf("aggregate-%d", i))
		n := 1 + i%37
		want := int(javaMurmur2(key)&0x7fffffff) % n
		if got := tp.Partition(&kgo.Record{Key: key}, n); got != want {
			t.Fatalf("Partition(%q, %d) = %d, want %d", key, n, got, want)
		}
	}
}

func TestSetPartitionOverridesHashing(t *testing.T) {
	tp := newPartitioner(nil).ForTopic("orders")
	key := []byte("foobar")
	hashed := int(murmur2Vectors[1].want&0x7fffffff) % 8
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
