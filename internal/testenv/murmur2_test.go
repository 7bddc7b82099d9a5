package testenv

import "testing"

func TestMurmur2MatchesKafkaVectors(t *testing.T) {
	for _, v := range Murmur2Vectors {
		if got := Murmur2(v.Key); got != v.Want {
			t.Errorf("Murmur2(%q) = %d, Kafka says %d", v.Key, got, v.Want)
		}
	}
	// toPositive masks the sign bit: -973932308 & 0x7fffffff = 1173551340.
	if got := KafkaPartition([]byte("21"), 1000); got != 1173551340%1000 {
		t.Errorf("KafkaPartition(21, 1000) = %d", got)
	}
}
