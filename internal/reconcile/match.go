package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/router"
)

// route routes a row of table o as the relay would, through o's plan.
// The message is o.msg, valid until the next call on o; why says what
// stops a row from being looked for: the router refuses it or
// relay.topic_pattern its topic ("unroutable"), or its event id is NULL
// ("no id").
func (v *verifier) route(o *outbox, r *row) (msg *router.Message, id []byte, why string) {
	if err := o.plan.RouteTo(&o.msg, r.cols, r.at); err != nil {
		return nil, nil, "unroutable"
	}
	if v.pattern != nil && !v.pattern.MatchString(o.msg.Topic) {
		return nil, nil, "unroutable"
	}
	if len(o.msg.Headers) == 0 || o.msg.Headers[0].Key != headerEventID || o.msg.Headers[0].Value == nil {
		return nil, nil, "no id"
	}
	return &o.msg, o.msg.Headers[0].Value, ""
}

// scanAll calls each with every row of the window of every table, table
// after table, in tx: one snapshot for all of them, so that every pass
// sees the same rows of each table.
func (v *verifier) scanAll(ctx context.Context, tx pgx.Tx, each func(ti int, o *outbox, r *row) error) error {
	o := v.opts
	for ti, t := range v.tables {
		err := t.scanRows(ctx, tx, o.Since, o.Until, o.PageRows, v.fw, func(r *row) error { return each(ti, t, r) })
		if err != nil {
			return fmt.Errorf("verifying outbox table %s: %w", t.quoted, err)
		}
	}
	return nil
}

// verify runs the passes in tx and returns the candidates for unknown:
// ids of records in the window no row of the window has, with their
// record counts.
func (v *verifier) verify(ctx context.Context, tx pgx.Tx) (map[string]int, error) {
	o := v.opts
	cl, err := kgo.NewClient(v.kopts...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	defer cl.Close()
	lo, hi := o.Since.Add(-o.Margin).UnixMilli(), o.Until.Add(o.Margin).UnixMilli()
	// The dead letters first: a row with one is dead-lettered, not
	// missing or unroutable.
	if v.dead, err = v.deadLetters(ctx, kadm.NewClient(cl), lo, o.MaxIDs); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// Not a reason to verify nothing (e.g. no READ on the topic):
		// the rows it holds are reported missing, and the report says
		// why.
		v.rep.DeadLettersUnread = err.Error()
		v.log.Warn("verify: cannot read the dead-letter topic; rows it holds are reported missing", "topic", v.cfg.Relay.DeadLetterTopic, "err", err)
	}
	// Pass 0: count the rows and learn their topics.
	topics := map[string]bool{}
	err = v.scanAll(ctx, tx, func(_ int, t *outbox, r *row) error {
		v.rep.Rows++
		switch msg, _, why := v.route(t, r); why {
		case "":
			topics[msg.Topic] = true
		case "unroutable":
			id := t.plan.EventID(r.cols)
			if class, ok := v.dead[id]; ok {
				v.rep.DeadLettered = append(v.rep.DeadLettered, DeadLettered{ID: id, Class: class})
				break
			}
			v.rep.Unroutable = append(v.rep.Unroutable, id)
		default:
			v.rep.RowsWithoutID++
		}
		if v.rep.Rows%o.ProgressEvery == 0 {
			v.log.Info("verify: counting the window's rows", "rows", v.rep.Rows)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for t := range topics {
		v.rep.Topics = append(v.rep.Topics, t)
	}
	slices.Sort(v.rep.Topics)

	spans, err := listRanges(ctx, kadm.NewClient(cl), v.rep.Topics, lo)
	if err != nil {
		return nil, err
	}
	total := spans.records()
	passes := max(1, int((total+int64(o.MaxIDs)-1)/int64(o.MaxIDs)))
	v.rep.Passes = passes
	v.log.Debug("verify: window read", "rows", v.rep.Rows, "topics", len(v.rep.Topics), "records_to_read", total, "passes", passes)

	candidates := map[string]int{}
	for pass := range passes {
		// Pass p holds the records whose id is in its share.
		// Sized for this pass's share (plus a tenth for the hash's
		// unevenness), so that the slice is not grown by doubling.
		held := make([]entry, 0, min(int64(o.MaxIDs), total/int64(passes)+total/int64(passes)/10+16))
		var texts []string
		var read int64
		err := spans.read(ctx, v.kopts, func(rec *kgo.Record) {
			read++
			if read%o.ProgressEvery == 0 {
				v.log.Info("verify: reading topics", "pass", pass+1, "passes", passes, "records", read, "of_at_most", total)
			}
			ms := rec.Timestamp.UnixMilli()
			if ms < lo || ms > hi {
				return
			}
			id, ok := headerOf(rec, headerEventID)
			if !ok {
				if pass == 0 {
					v.rep.Unparsed++
				}
				return
			}
			k, isUUID := keyOf(id)
			if k.pass(passes) != pass {
				return
			}
			e := entry{k: k, ms: ms}
			if !isUUID {
				texts = append(texts, string(id))
				e.text = int32(len(texts))
			}
			held = append(held, e)
		})
		if err != nil {
			return nil, err
		}
		v.rep.Records += int64(len(held))
		v.rep.MaxHeld = max(v.rep.MaxHeld, len(held))
		sort.Slice(held, func(i, j int) bool { return bytes.Compare(held[i].k[:], held[j].k[:]) < 0 })

		// The rows of this share, looked up. Records are matched by
		// event id alone: each row takes one record of its id not
		// taken yet. An id whose records are fewer than its rows (rows
		// of two tables, or of one, sharing it) is short: which row
		// lost its record cannot be told, so none is reported yet, and
		// every row of it is reported below.
		var rows int64
		short := map[key]*shortage{}
		err = v.scanAll(ctx, tx, func(_ int, t *outbox, r *row) error {
			rows++
			if rows%o.ProgressEvery == 0 {
				v.log.Info("verify: checking rows", "pass", pass+1, "passes", passes, "rows", rows, "of", v.rep.Rows)
			}
			msg, id, why := v.route(t, r)
			if why != "" {
				return nil // counted by pass 0
			}
			k, _ := keyOf(id)
			if k.pass(passes) != pass {
				return nil
			}
			i := sort.Search(len(held), func(i int) bool { return bytes.Compare(held[i].k[:], k[:]) >= 0 })
			n, took := 0, false
			for j := i; j < len(held) && held[j].k == k; j++ {
				if !took && !held[j].matched {
					held[j].matched, took = true, true
				}
				n++
			}
			switch {
			case n == 0:
				return v.unmatched(ctx, msg, id, r)
			case !took:
				short[k] = &shortage{records: n}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		// A seen id with records left over has more records than rows:
		// duplicates.
		for i := 0; i < len(held); {
			j, extra := i, false
			for ; j < len(held) && held[j].k == held[i].k; j++ {
				extra = extra || !held[j].matched
			}
			if held[i].matched && extra {
				v.rep.Duplicates = append(v.rep.Duplicates, v.idOf(held[i], texts))
			}
			i = j
		}
		// Every row of a short id, as if it had no record: republishing
		// all of them gives duplicates (fine under at-least-once) where
		// republishing only the rows beyond the records' number could
		// send a row whose record is there while the lost one stays
		// lost. A row not confirmed yet may not be on Kafka yet: when
		// the confirmed rows are no more than the records, they are
		// seen (a later verify, once every row is confirmed, counts
		// again). The rows are read twice more, to count and to report,
		// only when an id is short.
		if len(short) > 0 {
			each := func(report bool) func(int, *outbox, *row) error {
				return func(_ int, t *outbox, r *row) error {
					msg, id, why := v.route(t, r)
					if why != "" {
						return nil
					}
					k, _ := keyOf(id)
					s := short[k]
					switch {
					case s == nil:
					case !report:
						if r.confirmed {
							s.confirmed++
						}
					case !r.confirmed:
						v.rep.Unconfirmed = append(v.rep.Unconfirmed, string(id))
					case s.confirmed > s.records:
						return v.unmatched(ctx, msg, id, r)
					}
					return nil
				}
			}
			for _, report := range []bool{false, true} {
				if err := v.scanAll(ctx, tx, each(report)); err != nil {
					return nil, err
				}
			}
		}
		// Records no row of the window has, with a timestamp in the window
		// itself (the margins hold records of rows outside it).
		since, until := o.Since.UnixMilli(), o.Until.UnixMilli()
		for i := 0; i < len(held); {
			j := i
			inWindow := false
			for ; j < len(held) && held[j].k == held[i].k; j++ {
				inWindow = inWindow || (held[j].ms >= since && held[j].ms < until)
			}
			if !held[i].matched && inWindow {
				candidates[v.idOf(held[i], texts)] = j - i
			}
			i = j
		}
	}
	return candidates, nil
}

// shortage counts an event id's records (fewer than its rows) and its
// rows whose transactions the slot has confirmed.
type shortage struct{ records, confirmed int }

// unmatched reports row r, routed to msg with event id id, which no
// record of the topics is counted for: dead-lettered, skipped, not
// confirmed yet, or missing (and republished under Options.Republish).
func (v *verifier) unmatched(ctx context.Context, msg *router.Message, id []byte, r *row) error {
	class, dead := v.dead[string(id)]
	switch {
	case dead:
		// Not published by design: the dead letter holds it (and its
		// broker ack is what confirmed it).
		v.rep.DeadLettered = append(v.rep.DeadLettered, DeadLettered{ID: string(id), Class: class})
	case v.skippedTooLarge(msg):
		// Skipped by the relay's policy before it was produced.
		v.rep.Skipped = append(v.rep.Skipped, DeadLettered{ID: string(id), Class: router.ClassRecordTooLarge.String()})
	case !r.confirmed:
		// Its transaction may not be on Kafka yet.
		v.rep.Unconfirmed = append(v.rep.Unconfirmed, string(id))
	default:
		v.rep.Missing = append(v.rep.Missing, string(id))
		if v.opts.Republish {
			return v.republish(ctx, msg, r.at)
		}
	}
	return nil
}

// idOf is the event id of held record e, whose text, when it is not a
// UUID, is in texts.
func (v *verifier) idOf(e entry, texts []string) string {
	if e.text > 0 {
		return texts[e.text-1]
	}
	return e.k.uuid()
}

// unknown looks the candidates up in every table (whole, not the window),
// with a snapshot taken after the topics were read: a record whose row is
// in any of the tables, outside the window or committed since, is not
// unknown.
func (v *verifier) unknown(ctx context.Context, conn *pgx.Conn, candidates map[string]int) error {
	ids := make([]string, 0, len(candidates))
	for id := range candidates {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	found, err := existing(ctx, conn, v.tables, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if found[id] {
			continue
		}
		v.rep.Unknown = append(v.rep.Unknown, id)
		if candidates[id] > 1 {
			v.rep.Duplicates = append(v.rep.Duplicates, id)
		}
	}
	return nil
}

// headerOf returns the value of r's first header named name.
func headerOf(r *kgo.Record, name string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return h.Value, h.Value != nil
		}
	}
	return nil, false
}
