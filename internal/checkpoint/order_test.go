package checkpoint

import (
	"fmt"
	"testing"

	"github.com/jackc/pglogrepl"
)

// This file checks the watermark against a reference model over every order
// in which acks can arrive. The replication events of a scenario (Begin, Add
// per record, Commit or Abort, one transaction after the other) keep their
// stream order; each record's Ack may happen at any point after its Add, in
// any order relative to the other acks and to later replication events. All
// such interleavings are enumerated and replayed on a fresh Tracker, and after
// every event Confirmed, Pending and InFlight are compared with the model.

// specTx describes one transaction of a scenario.
type specTx struct {
	records int
	abort   bool // the stream breaks before Commit: Abort instead
}

type evKind uint8

const (
	evBegin evKind = iota
	evAdd
	evCommit
	evAbort
	evAck
)

func (k evKind) String() string {
	return [...]string{"Begin", "Add", "Commit", "Abort", "Ack"}[k]
}

type event struct {
	kind evKind
	tx   int // index into the scenario
	rec  int // record index within tx, for Add and Ack
}

func (e event) String() string {
	if e.kind == evAdd || e.kind == evAck {
		return fmt.Sprintf("%s(tx%d.r%d)", e.kind, e.tx, e.rec)
	}
	return fmt.Sprintf("%s(tx%d)", e.kind, e.tx)
}

// endOf is the TransactionEndLSN used for scenario transaction i.
func endOf(i int) pglogrepl.LSN { return pglogrepl.LSN(0x1000 + 0x100*(i+1)) }

// sizeOf is the byte size used for record rec of transaction i.
func sizeOf(i, rec int) int { return 10*(i+1) + rec }

const modelStart = pglogrepl.LSN(0x1000)

// model is the reference: it keeps raw per-transaction facts and recomputes
// everything from scratch, with no queue, folding or incremental state.
type model struct {
	begun     []bool
	added     []int
	acked     []int
	committed []bool
	aborted   []bool
}

func newModel(n int) *model {
	return &model{
		begun: make([]bool, n), added: make([]int, n), acked: make([]int, n),
		committed: make([]bool, n), aborted: make([]bool, n),
	}
}

func (m *model) apply(e event) {
	switch e.kind {
	case evBegin:
		m.begun[e.tx] = true
	case evAdd:
		m.added[e.tx]++
	case evCommit:
		m.committed[e.tx] = true
	case evAbort:
		m.aborted[e.tx] = true
	case evAck:
		m.acked[e.tx]++
	}
}

// done reports whether transaction i counts as finished for the watermark.
func (m *model) done(i int) bool {
	return m.committed[i] && m.acked[i] == m.added[i]
}

// confirmed is the start or the end of the last transaction of the longest
// prefix (in stream order, aborted ones skipped) in which all are done.
func (m *model) confirmed() pglogrepl.LSN {
	c := modelStart
	for i := range m.begun {
		if !m.begun[i] {
			break
		}
		if m.aborted[i] {
			continue
		}
		if !m.done(i) {
			break
		}
		c = max(c, endOf(i))
	}
	return c
}

// pending counts transactions begun and not yet confirmed or dropped.
func (m *model) pending() int {
	n := 0
	blocked := false
	for i := range m.begun {
		if !m.begun[i] {
			continue
		}
		if m.aborted[i] {
			if m.acked[i] < m.added[i] {
				n++
			}
			continue
		}
		if blocked || !m.done(i) {
			blocked = true
			n++
		}
	}
	return n
}

// streamEvents returns the replication goroutine's events in stream order and
// for every record the index of its Add in that list.
func streamEvents(spec []specTx) (evs []event, addAt [][]int) {
	addAt = make([][]int, len(spec))
	for i, s := range spec {
		evs = append(evs, event{kind: evBegin, tx: i})
		for r := 0; r < s.records; r++ {
			addAt[i] = append(addAt[i], len(evs))
			evs = append(evs, event{kind: evAdd, tx: i, rec: r})
		}
		if s.abort {
			evs = append(evs, event{kind: evAbort, tx: i})
		} else {
			evs = append(evs, event{kind: evCommit, tx: i})
		}
	}
	return evs, addAt
}

// forEachInterleaving calls visit with every interleaving of the stream
// events and the acks, each ack after its record's Add.
func forEachInterleaving(spec []specTx, visit func([]event)) {
	stream, addAt := streamEvents(spec)
	type rec struct{ tx, r, addIdx int }
	var recs []rec
	for i := range spec {
		for r, at := range addAt[i] {
			recs = append(recs, rec{i, r, at})
		}
	}
	ackDone := make([]bool, len(recs))
	seq := make([]event, 0, len(stream)+len(recs))
	var walk func(next int)
	walk = func(next int) {
		if next == len(stream) && len(seq) == len(stream)+len(recs) {
			visit(seq)
			return
		}
		if next < len(stream) {
			seq = append(seq, stream[next])
			walk(next + 1)
			seq = seq[:len(seq)-1]
		}
		for k, rc := range recs {
			if ackDone[k] || rc.addIdx >= next {
				continue
			}
			ackDone[k] = true
			seq = append(seq, event{kind: evAck, tx: rc.tx, rec: rc.r})
			walk(next)
			seq = seq[:len(seq)-1]
			ackDone[k] = false
		}
	}
	walk(0)
}

// replay runs seq on a fresh Tracker and compares it with the model after
// every event. It returns a description of the first mismatch, or "".
func replay(spec []specTx, seq []event) string {
	tr := New(Limits{})
	tr.SetStart(modelStart)
	m := newModel(len(spec))
	txs := make([]*Tx, len(spec))
	var wantRecords int
	var wantBytes int64
	prev := tr.Confirmed()
	for step, e := range seq {
		switch e.kind {
		case evBegin:
			txs[e.tx] = tr.Begin()
		case evAdd:
			tr.Add(txs[e.tx], sizeOf(e.tx, e.rec))
			wantRecords++
			wantBytes += int64(sizeOf(e.tx, e.rec))
		case evCommit:
			tr.Commit(txs[e.tx], endOf(e.tx))
		case evAbort:
			tr.Abort(txs[e.tx])
		case evAck:
			tr.Ack(txs[e.tx], sizeOf(e.tx, e.rec))
			wantRecords--
			wantBytes -= int64(sizeOf(e.tx, e.rec))
		}
		m.apply(e)
		got, want := tr.Confirmed(), m.confirmed()
		where := func() string { return fmt.Sprintf("after step %d %v of %v", step, e, seq) }
		if got != want {
			return fmt.Sprintf("Confirmed = %v, model says %v, %s", got, want, where())
		}
		if got < prev {
			return fmt.Sprintf("Confirmed went back from %v to %v, %s", prev, got, where())
		}
		prev = got
		if gotP, wantP := tr.Pending(), m.pending(); gotP != wantP {
			return fmt.Sprintf("Pending = %d, model says %d, %s", gotP, wantP, where())
		}
		if r, b := tr.InFlight(); r != wantRecords || b != wantBytes {
			return fmt.Sprintf("InFlight = (%d, %d), want (%d, %d), %s", r, b, wantRecords, wantBytes, where())
		}
	}
	if tr.Pending() != 0 {
		return fmt.Sprintf("Pending = %d at the end of %v", tr.Pending(), seq)
	}
	return ""
}

func TestConfirmedEveryAckOrder(t *testing.T) {
	tests := []struct {
		name string
		spec []specTx
	}{
		{
			name: "single tx three records",
			spec: []specTx{{records: 3}},
		},
		{
			name: "zero-record tx between two with records",
			spec: []specTx{{records: 2}, {records: 0}, {records: 1}},
		},
		{
			name: "four txs with 1 0 2 1 records",
			spec: []specTx{{records: 1}, {records: 0}, {records: 2}, {records: 1}},
		},
		{
			name: "four txs with 2 0 2 1 records",
			spec: []specTx{{records: 2}, {records: 0}, {records: 2}, {records: 1}},
		},
		{
			name: "four txs with 1 3 0 1 records",
			spec: []specTx{{records: 1}, {records: 3}, {records: 0}, {records: 1}},
		},
		{
			name: "zero-record txs leading, between and trailing",
			spec: []specTx{{records: 0}, {records: 2}, {records: 0}, {records: 0}, {records: 1}, {records: 0}},
		},
		{
			name: "only zero-record txs",
			spec: []specTx{{records: 0}, {records: 0}, {records: 0}},
		},
		{
			name: "abort with unacked records then re-sent copy",
			spec: []specTx{{records: 2}, {records: 1, abort: true}, {records: 1}, {records: 0}},
		},
		{
			name: "abort behind a pending committed tx",
			spec: []specTx{{records: 1}, {records: 2, abort: true}, {records: 0}, {records: 1}},
		},
		{
			name: "abort of a zero-record tx",
			spec: []specTx{{records: 1}, {records: 0, abort: true}, {records: 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			paths := 0
			var failure string
			forEachInterleaving(tc.spec, func(seq []event) {
				paths++
				if failure == "" {
					failure = replay(tc.spec, seq)
				}
			})
			if failure != "" {
				t.Fatal(failure)
			}
			if want := countInterleavings(tc.spec); paths != want {
				t.Fatalf("enumerated %d interleavings, want %d", paths, want)
			}
			t.Logf("%d interleavings checked", paths)
		})
	}
}

// countInterleavings counts the valid interleavings by dynamic programming
// over (stream position, acks available, acks done) — a different method
// from the enumeration, so a pruning bug in forEachInterleaving shows up.
func countInterleavings(spec []specTx) int {
	stream, _ := streamEvents(spec)
	// After consuming stream[:i], the number of records whose Add has been
	// seen is adds[i]. The state is (i, acked); acks are interchangeable for
	// counting up to the choice of which available one: (adds[i]-acked) ways.
	adds := make([]int, len(stream)+1)
	for i, e := range stream {
		adds[i+1] = adds[i]
		if e.kind == evAdd {
			adds[i+1]++
		}
	}
	total := adds[len(stream)]
	memo := map[[2]int]int{}
	var f func(i, acked int) int
	f = func(i, acked int) int {
		if i == len(stream) && acked == total {
			return 1
		}
		key := [2]int{i, acked}
		if v, ok := memo[key]; ok {
			return v
		}
		n := 0
		if i < len(stream) {
			n += f(i+1, acked)
		}
		if avail := adds[i] - acked; avail > 0 {
			n += avail * f(i, acked+1)
		}
		memo[key] = n
		return n
	}
	return f(0, 0)
}
