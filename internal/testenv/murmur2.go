package testenv

// Murmur2 is Kafka's org.apache.kafka.common.utils.Utils.murmur2 (apache/kafka
// clients/src/main/java/org/apache/kafka/common/utils/Utils.java at
// 1eb7644349cb07139d6a3c1ad1986979647cac99), transcribed with Java's int32
// arithmetic (seed 0x9747b28c, m 0x5bd1e995, r 24, the tail switch falling
// through), so that tests check partitions against Kafka rather than against
// franz-go's own copy.
func Murmur2(data []byte) int32 {
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

// KafkaPartition is the partition Kafka's Java producer picks for a keyed
// record: BuiltInPartitioner.partitionForKey,
// Utils.toPositive(murmur2(key)) % partitions, toPositive being
// n & 0x7fffffff.
func KafkaPartition(key []byte, partitions int32) int32 {
	return (Murmur2(key) & 0x7fffffff) % partitions
}

// Murmur2Vector is one of Kafka's murmur2 test vectors.
type Murmur2Vector struct {
	Key  []byte
	Want int32 // a signed Java int
}

// Murmur2Vectors are Kafka's UtilsTest.testMurmur2 vectors
// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
var Murmur2Vectors = []Murmur2Vector{
	{[]byte("21"), -973932308},
	{[]byte("foobar"), -790332482},
	{[]byte("a-little-bit-long-string"), -985981536},
	{[]byte("a-little-bit-longer-string"), -1486304829},
	{[]byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
	{[]byte{'a', 'b', 'c'}, 479470107},
}
