package publisher

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// batchOverhead is what franz-go counts for a record batch with no records
// (kgo's recordBatchOverhead: the v2 batch header, 61 bytes, and the 4-byte
// length of the records array), plus a margin for the size differences of
// the produce request versions it may pick before it knows the broker's.
const batchOverhead = 65 + 16

// minBatchBytes is the smallest batch limit franz-go accepts.
const minBatchBytes = 512

// AloneSize is the size franz-go gives r in a batch of its own: the batch
// overhead and the record as the v2 format encodes it. A record fits a
// topic when AloneSize is at most the topic's batch limit; the broker then
// sees a batch 4 bytes smaller (it does not count the array length).
func AloneSize(r *kgo.Record) int {
	body := 1 + // attributes
		1 + // timestamp delta 0
		1 + // offset delta 0
		varintLen(len(r.Key)) + len(r.Key) +
		varintLen(len(r.Value)) + len(r.Value) +
		varintLen(len(r.Headers))
	for _, h := range r.Headers {
		body += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return batchOverhead + varintLen(body) + body
}

// varintLen is the length of n as a zigzag varint (Kafka's record fields).
func varintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(n))
}
