package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchMaxBytes bounds one fetch response.
const fetchMaxBytes = 4 << 20

// span is the offsets of one partition verify reads: [start, end).
type span struct{ start, end int64 }

// ranges are the spans to read, by topic and partition.
type ranges map[string]map[int32]span

// records is how many records the spans hold at most.
func (r ranges) records() int64 {
	var n int64
	for _, ps := range r {
		for _, s := range ps {
			n += s.end - s.start
		}
	}
	return n
}

// listRanges returns, for every partition of topics, the first offset whose
// timestamp is at or after fromMs (ListOffsets by timestamp) and the last
// stable offset. A topic that does not exist has no partitions.
func listRanges(ctx context.Context, adm *kadm.Client, topics []string, fromMs int64) (ranges, error) {
	out := ranges{}
	if len(topics) == 0 {
		return out, nil
	}
	starts, err := adm.ListOffsetsAfterMilli(ctx, fromMs, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing offsets by timestamp: %w", err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	for _, t := range topics {
		for p, e := range ends[t] {
			if errors.Is(e.Err, kerr.UnknownTopicOrPartition) {
				continue // the topic does not exist: each of its rows is missing
			}
			if e.Err != nil {
				return nil, fmt.Errorf("listing end offsets of %s[%d]: %w", t, p, e.Err)
			}
			s, ok := starts.Lookup(t, p)
			if !ok || s.Err != nil {
				err := errors.New("not listed")
				if ok {
					err = s.Err
				}
				return nil, fmt.Errorf("listing offsets by timestamp of %s[%d]: %w", t, p, err)
			}
			if out[t] == nil {
				out[t] = map[int32]span{}
			}
			start := max(s.Offset, 0)
			out[t][p] = span{start: start, end: max(e.Offset, start)}
		}
	}
	return out, nil
}

// read calls each with every committed record of the spans, partition by
// partition without a consumer group, with read_committed isolation.
// Control records are read (and not passed on) so that a partition ending
// in a transaction marker is known to be read to its end.
func (r ranges) read(ctx context.Context, opts []kgo.Opt, each func(*kgo.Record)) error {
	todo := map[string]map[int32]int64{}
	from := map[string]map[int32]kgo.Offset{}
	for t, ps := range r {
		for p, s := range ps {
			if s.start >= s.end {
				continue
			}
			if todo[t] == nil {
				todo[t], from[t] = map[int32]int64{}, map[int32]kgo.Offset{}
			}
			todo[t][p], from[t][p] = s.end, kgo.NewOffset().At(s.start)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		// Small fetches: a record read is held as 32 bytes, and the
		// fetch buffers, not the ids, would otherwise be most of
		// verify's memory (franz-go's default is 50 MiB a fetch).
		kgo.FetchMaxBytes(fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(fetchMaxBytes),
		kgo.MaxConcurrentFetches(1),
	)...)
	if err != nil {
		return fmt.Errorf("creating kafka consumer: %w", err)
	}
	defer cl.Close()
	for len(todo) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading topics: %w", err)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("%s[%d]: %w", t, p, err))
		})
		if ferr != nil {
			return fmt.Errorf("reading topics: %w", ferr)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			ps := todo[rec.Topic]
			if end, ok := ps[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(ps, rec.Partition)
				if len(ps) == 0 {
					delete(todo, rec.Topic)
				}
			}
			if !rec.Attrs.IsControl() && rec.Offset < r[rec.Topic][rec.Partition].end {
				each(rec)
			}
		})
	}
	return nil
}
