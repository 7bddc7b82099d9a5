// A heal's deduplication against Kafka: the rows of the gap whose event
// id is already on the topic they route to (read_committed) are not
// published again. With exactly-once delivery the heal fenced the
// transactional id first, so no transaction of this relay is still open.
// A record proves a row delivered only if no other outbox row carries its
// event id (in the gap, or before the fence, in any of the tables: two
// outbox tables with their own id sequences share ids); the rows of a
// shared id are published again.

package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/snapshot"
)

// Bounds of the deduplication: past them it is given up (the gap is
// published whole: duplicates, never a loss).
const (
	dedupMaxIDs  = 1_000_000
	dedupMargin  = 5 * time.Minute // a record's timestamp (its commit time) can precede the row's time column by the transaction's length at most; this much is read before
	dedupTimeout = 2 * time.Minute
)

// onKafka returns the event ids of the rows matching where (in rd's
// snapshot) that are on the topic they route to, read_committed, among
// the records whose timestamp is at or after the oldest of those rows'
// outbox.time_column minus dedupMargin. A row whose id is there was
// delivered (at least once): skipping it loses nothing. Whatever it cannot
// do (no time column, too many rows, a broker that does not answer in
// dedupTimeout) it logs and returns what it found so far or nil: the
// rows not found are published again (duplicates).
func (r *Relay) onKafka(ctx context.Context, rd *snapshot.Reader, where string) map[string]struct{} {
	found, err := r.findOnKafka(ctx, rd, where)
	if err != nil {
		r.log.Warn("heal: not deduplicating against kafka (the gap's rows are published again, including those already there)", "err", err)
	}
	return found
}

func (r *Relay) findOnKafka(ctx context.Context, rd *snapshot.Reader, where string) (map[string]struct{}, error) {
	tables, err := r.snapshotTables()
	if err != nil {
		return nil, err
	}
	want := map[string]string{} // event id -> topic ("": not routed, not looked for)
	// Event ids of more than one gap row: a record with one of them does
	// not tell which row it was published for.
	shared := map[string]bool{}
	topics := map[string]bool{}
	var from *time.Time
	for i, t := range tables {
		var has bool
		if err := rd.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = $1 AND attname = $2 AND NOT attisdropped)`, t.OID, r.cfg.Outbox.TimeColumn).Scan(&has); err != nil {
			return nil, fmt.Errorf("looking up %s.%s: %w", t, r.cfg.Outbox.TimeColumn, err)
		}
		if !has {
			return nil, fmt.Errorf("%s has no column %s (outbox.time_column): no time to read the topics from", t, r.cfg.Outbox.TimeColumn)
		}
		q := `SELECT min(` + pgx.Identifier{r.cfg.Outbox.TimeColumn}.Sanitize() + `) FROM ` + pgx.Identifier{t.Schema, t.Name}.Sanitize()
		if where != "" {
			q += ` WHERE ` + where
		}
		var min *time.Time
		if err := rd.QueryRow(ctx, q).Scan(&min); err != nil {
			return nil, fmt.Errorf("reading the oldest %s of the gap in %s: %w", r.cfg.Outbox.TimeColumn, t, err)
		}
		if min != nil && (from == nil || min.Before(*from)) {
			from = min
		}
		plan, err := r.router.Bind(r.tables[i])
		if err != nil {
			return nil, fmt.Errorf("binding %s: %w", t, err)
		}
		pk, err := rd.PrimaryKey(ctx, t)
		if err != nil {
			return nil, err
		}
		err = rd.Scan(ctx, t, where, pk, r.cfg.Snapshot.ChunkRows, func(cols []*pglogrepl.TupleDataColumn) error {
			if len(want) >= dedupMaxIDs {
				return errTooMany
			}
			id := plan.EventID(cols)
			if id == "" {
				return nil
			}
			if _, ok := want[id]; ok {
				shared[id] = true
			}
			msg, err := plan.Route(cols, time.Now())
			if err != nil {
				want[id] = "" // dead-lettered or refused when published: not looked for
				return nil
			}
			want[id] = msg.Topic
			topics[msg.Topic] = true
			return nil
		})
		if errors.Is(err, errTooMany) {
			return nil, fmt.Errorf("more than %d rows in the gap", dedupMaxIDs)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(topics) == 0 || from == nil {
		return nil, nil
	}
	found, err := r.readOnKafka(ctx, want, topics, *from)
	if len(found) == 0 {
		return found, err
	}
	n := 0
	for id := range shared {
		if _, ok := found[id]; ok {
			delete(found, id)
			n++
		}
	}
	if n > 0 {
		r.log.Warn("heal: event ids found on kafka that several gap rows carry: those rows are published again", "ids", n)
	}
	if serr := r.dropShared(ctx, rd, tables, where, found); serr != nil {
		return nil, errors.Join(err, serr)
	}
	return found, err
}

// readOnKafka reads topics, read_committed, from the records timestamped
// at or after from minus dedupMargin to their stable end, and returns the
// event ids of want found on the topic want gives them.
func (r *Relay) readOnKafka(ctx context.Context, want map[string]string, topics map[string]bool, from time.Time) (map[string]struct{}, error) {
	opts, err := kafkaconf.ClientOpts(r.cfg.Kafka, kafkaconf.Options{DialTimeout: kafkaconf.ShortDial})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dedupTimeout)
	defer cancel()
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to kafka: %w", err)
	}
	defer adm.Close()
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ka := kadm.NewClient(adm)
	starts, err := ka.ListOffsetsAfterMilli(ctx, from.Add(-dedupMargin).UnixMilli(), names...)
	if err != nil {
		return nil, fmt.Errorf("listing offsets by timestamp: %w", err)
	}
	ends, err := r.stableEnds(ctx, ka, names)
	if err != nil {
		return nil, err
	}
	parts := map[string]map[int32]kgo.Offset{}
	left := map[string]map[int32]int64{} // the end offset still to reach
	for _, t := range names {
		for p, e := range ends[t] {
			if errors.Is(e.Err, kerr.UnknownTopicOrPartition) {
				continue
			}
			if e.Err != nil {
				return nil, fmt.Errorf("listing end offsets of %s[%d]: %w", t, p, e.Err)
			}
			s, ok := starts.Lookup(t, p)
			if !ok || s.Err != nil || s.Offset < 0 || s.Offset >= e.Offset {
				continue // nothing at or after the time
			}
			if parts[t] == nil {
				parts[t], left[t] = map[int32]kgo.Offset{}, map[int32]int64{}
			}
			parts[t][p] = kgo.NewOffset().At(s.Offset)
			left[t][p] = e.Offset
		}
	}
	found := map[string]struct{}{}
	if len(parts) == 0 {
		return found, nil
	}
	// Control records kept: the end offset is the last stable offset,
	// which a transaction's commit or abort marker may precede; without
	// them the read never reaches it.
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(parts), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, fmt.Errorf("connecting to kafka: %w", err)
	}
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return found, fmt.Errorf("reading the gap's topics: %w (deduplicated %d rows so far)", ctx.Err(), len(found))
		}
		fs.EachError(func(t string, p int32, err error) {
			r.log.Warn("heal: reading a topic to deduplicate", "topic", t, "partition", p, "err", err)
		})
		fs.EachRecord(func(rec *kgo.Record) {
			for _, h := range rec.Headers {
				if rec.Attrs.IsControl() {
					break
				}
				if h.Key == "id" {
					if t, ok := want[string(h.Value)]; ok && t != "" && t == rec.Topic {
						found[string(h.Value)] = struct{}{}
					}
					break
				}
			}
			if end, ok := left[rec.Topic][rec.Partition]; ok && rec.Offset+1 >= end {
				delete(left[rec.Topic], rec.Partition)
				if len(left[rec.Topic]) == 0 {
					delete(left, rec.Topic)
				}
			}
		})
	}
	return found, nil
}

var errTooMany = errors.New("too many rows")

// dropShared removes from found the event ids that a row outside the gap
// (one that precedes the fence, in any of the tables) carries too: the
// record found may be that row's, so it proves nothing of the gap row's,
// which is published again (a duplicate at worst). With no fence (where
// empty) every row is in the gap, and findOnKafka already dropped the ids
// of several gap rows.
func (r *Relay) dropShared(ctx context.Context, rd *snapshot.Reader, tables []snapshot.Table, where string, found map[string]struct{}) error {
	if where == "" || len(found) == 0 {
		return nil
	}
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	idCol := pgx.Identifier{r.cfg.Router.FieldEventID}.Sanitize()
	n := 0
	for _, t := range tables {
		// The ids as text, the form pgoutput sends and EventID returns
		// (the reader's session prints values as pgoutput does).
		rows, err := rd.Query(ctx, `SELECT DISTINCT o.id FROM (SELECT `+idCol+`::text AS id FROM `+pgx.Identifier{t.Schema, t.Name}.Sanitize()+
			` WHERE NOT (`+where+`)) o JOIN unnest($1::text[]) AS f(id) ON o.id = f.id`, ids)
		if err != nil {
			return fmt.Errorf("looking up the found event ids outside the gap in %s: %w", t, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("looking up the found event ids outside the gap in %s: %w", t, err)
			}
			if _, ok := found[id]; ok {
				delete(found, id)
				n++
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("looking up the found event ids outside the gap in %s: %w", t, err)
		}
	}
	if n > 0 {
		r.log.Warn("heal: event ids found on kafka that rows before the fence carry too: their gap rows are published again", "ids", n)
	}
	return nil
}

// stableEnds lists the end offsets (high watermarks) of topics and waits
// until every transaction with records below them has ended (each
// partition's last stable offset reached its end offset), as
// kafkalog.ReadStable does: the heal fenced this relay's transactional id
// first (exactly-once), so only another producer's transaction can hold
// a last stable offset, and this relay's committed records above it would
// otherwise not be read (published again). The wait is bounded by
// kafka.transaction_timeout; past it the last stable offsets are
// returned, and what lies above them is not deduplicated (logged).
func (r *Relay) stableEnds(ctx context.Context, ka *kadm.Client, names []string) (kadm.ListedOffsets, error) {
	hw, err := ka.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.Kafka.TransactionTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		lso, err := ka.ListCommittedOffsets(ctx, names...)
		if err != nil {
			return nil, fmt.Errorf("listing last stable offsets: %w", err)
		}
		held := ""
		hw.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(o.Topic, o.Partition); o.Err == nil && held == "" && (!ok || l.Err != nil || l.Offset < o.Offset) {
				held = fmt.Sprintf("%s[%d]", o.Topic, o.Partition)
			}
		})
		if held == "" {
			return hw, nil
		}
		select {
		case <-time.After(min(20*time.Millisecond<<min(attempt, 6), time.Second)):
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			r.log.Warn("heal: an open transaction holds a topic's last stable offset: the gap's rows above it are not deduplicated (published again if on Kafka)",
				"partition", held, "waited", r.cfg.Kafka.TransactionTimeout.String())
			return lso, nil
		}
	}
}
