package resume

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// A checkpoint is proven by the slot sending its last transaction again
// (commit LSN, xid, commit time, end LSN) and then the transaction it
// published in part; anything else first disproves it. Each case drives a
// State seeded with SeedFrom through the stream's messages and says what
// it must conclude.
func TestProof(t *testing.T) {
	at := time.Date(2026, 11, 28, 1, 0, 0, 123456e3, time.UTC)
	last := &Mark{CommitLSN: 0xF0, Xid: 700, CommitTime: at}
	open := &Mark{CommitLSN: 0x180, Xid: 702}
	cp := Checkpoint{Through: 0x100, Last: last, Open: open, Rows: 3}
	noOpen := Checkpoint{Through: 0x100, Last: last}

	// op: "begin" (lsn, xid, time), "commit" (lsn), "walend" (lsn).
	type msg struct {
		op   string
		lsn  pglogrepl.LSN
		xid  uint32
		at   time.Time
		want string // "": nothing concluded; "proved"; "why:<text in the reason>"; begin also "/<BeginAction>"
	}
	tests := []struct {
		name      string
		cp        Checkpoint
		slot      pglogrepl.LSN
		seedWhy   string // SeedFrom's refusal, when expected
		proving   bool   // Proving right after SeedFrom
		msgs      []msg
		provingAt bool // Proving at the end
	}{
		{
			name: "the slot re-sends the last transaction and then the open one: proven",
			cp:   cp, slot: 0x40, proving: true,
			msgs: []msg{
				{op: "begin", lsn: 0x50, xid: 690, at: at.Add(-time.Second), want: "/replay"}, {op: "commit", lsn: 0x60},
				{op: "walend", lsn: 0x60},
				{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "commit", lsn: 0x100, want: "proved"},
				{op: "begin", lsn: 0x180, xid: 702, at: at, want: "proved/new"},
			},
		},
		{
			name: "no open transaction: the last one's Commit proves it",
			cp:   noOpen, slot: 0x40, proving: true,
			msgs: []msg{
				{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "commit", lsn: 0x100, want: "proved"},
				{op: "walend", lsn: 0x200},
				{op: "begin", lsn: 0x200, xid: 705, at: at, want: "/new"},
			},
		},
		{
			name: "a restored server: another transaction at the same commit LSN and xid, committed at another time",
			cp:   noOpen, slot: 0x40, proving: true, provingAt: true,
			msgs: []msg{
				{op: "begin", lsn: 0x50, xid: 699, at: at.Add(time.Hour), want: "/replay"}, {op: "commit", lsn: 0x60},
				{op: "begin", lsn: 0xF0, xid: 700, at: at.Add(time.Hour), want: "why:where the checkpoint's last transaction has"},
			},
		},
		{
			name: "a restored server: a transaction past the last one's commit LSN first",
			cp:   noOpen, slot: 0x40, proving: true, provingAt: true,
			msgs: []msg{{op: "begin", lsn: 0xF8, xid: 700, at: at, want: "why:without that one"}},
		},
		{
			name: "the last transaction ends elsewhere",
			cp:   noOpen, slot: 0x40, proving: true, provingAt: true,
			msgs: []msg{{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "commit", lsn: 0x108, want: "why:ends at 0/108"}},
		},
		{
			name: "the stream passes the checkpoint's LSN without the last transaction",
			cp:   noOpen, slot: 0x40, proving: true, provingAt: true,
			msgs: []msg{{op: "walend", lsn: 0xF0}, {op: "walend", lsn: 0x100, want: "why:without sending the checkpoint's last transaction"}},
		},
		{
			name: "after the last transaction, another one than the open one first",
			cp:   cp, slot: 0x40, proving: true, provingAt: true,
			msgs: []msg{
				{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "commit", lsn: 0x100, want: "proved"},
				{op: "begin", lsn: 0x180, xid: 703, at: at, want: "why:not the one the checkpoint published in part"},
			},
		},
		{
			name: "after the last transaction, one at the open one's commit LSN and xid, committed at another time",
			cp:   Checkpoint{Through: 0x100, Last: last, Open: &Mark{CommitLSN: 0x180, Xid: 702, CommitTime: at}, Rows: 3}, slot: 0x40, proving: true, provingAt: true,
			msgs: []msg{
				{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "commit", lsn: 0x100, want: "proved"},
				{op: "begin", lsn: 0x180, xid: 702, at: at.Add(time.Minute), want: "why:not the one the checkpoint published in part"},
			},
		},
		{
			name: "the stream passes the open transaction's commit without it",
			cp:   cp, slot: 0x100, proving: true, provingAt: true,
			msgs: []msg{{op: "walend", lsn: 0x180}, {op: "walend", lsn: 0x181, want: "why:without sending it"}},
		},
		{
			name: "the slot is at the checkpoint: only the open transaction needs proof",
			cp:   cp, slot: 0x100, proving: true,
			msgs: []msg{{op: "begin", lsn: 0x180, xid: 702, at: at, want: "proved/new"}},
		},
		{
			name: "the slot is past the checkpoint: nothing to prove, nothing skipped",
			cp:   cp, slot: 0x200,
			msgs: []msg{{op: "begin", lsn: 0x200, xid: 710, at: at, want: "/new"}},
		},
		{
			name: "a checkpoint without its last transaction that would skip something is not used",
			cp:   Checkpoint{Through: 0x100}, slot: 0x40, seedWhy: "names no last transaction",
			msgs: []msg{{op: "begin", lsn: 0x50, xid: 690, at: at, want: "/new"}},
		},
		{
			name: "a checkpoint without its last transaction at the slot's position needs nothing",
			cp:   Checkpoint{Through: 0x40}, slot: 0x40,
			msgs: []msg{{op: "begin", lsn: 0x50, xid: 690, at: at, want: "/new"}},
		},
		{
			name: "a commit time unknown to the checkpoint is not compared",
			cp:   Checkpoint{Through: 0x100, Last: &Mark{CommitLSN: 0xF0, Xid: 700}}, slot: 0x40, proving: true,
			msgs: []msg{{op: "begin", lsn: 0xF0, xid: 700, at: at.Add(time.Hour), want: "/replay"}, {op: "commit", lsn: 0x100, want: "proved"}},
		},
		{
			name: "a session lost inside the last transaction: its Begin comes again",
			cp:   noOpen, slot: 0x40, proving: true,
			msgs: []msg{
				{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "lost"},
				{op: "walend", lsn: 0x40},
				{op: "begin", lsn: 0xF0, xid: 700, at: at, want: "/replay"}, {op: "commit", lsn: 0x100, want: "proved"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r State
			if why := r.SeedFrom(tc.cp, tc.slot); (why == "") != (tc.seedWhy == "") || !strings.Contains(why, tc.seedWhy) {
				t.Fatalf("SeedFrom = %q, want %q", why, tc.seedWhy)
			}
			if r.Proving() != tc.proving {
				t.Fatalf("Proving after SeedFrom = %t, want %t", r.Proving(), tc.proving)
			}
			for i, m := range tc.msgs {
				var proved bool
				var why, act string
				switch m.op {
				case "begin":
					proved, why = r.ProveBegin(Mark{CommitLSN: m.lsn, Xid: m.xid, CommitTime: m.at})
					if why == "" {
						act = "/" + r.Begin(m.lsn).String()
					}
				case "commit":
					proved, why = r.ProveCommit(m.lsn)
					r.Commit(m.lsn)
				case "walend":
					why = r.ProveWALEnd(m.lsn)
				case "lost":
					r.Lost()
				}
				got := ""
				switch {
				case why != "":
					got = "why:" + why
				case proved:
					got = "proved"
				}
				got += act
				if want := m.want; got != want && !(strings.HasPrefix(want, "why:") && strings.HasPrefix(got, "why:") && strings.Contains(got, want[4:])) {
					t.Fatalf("message %d (%s %s): got %q, want %q", i, m.op, m.lsn, got, want)
				}
				if why != "" {
					break
				}
			}
			if r.Proving() != tc.provingAt {
				t.Errorf("Proving at the end = %t, want %t", r.Proving(), tc.provingAt)
			}
		})
	}
}

// Earlier checkpoints are proven on the way, each by its last
// transaction: after the checkpoint itself is disproved (a restored
// server), the newest earlier one proven still holds; one passed without
// its transaction, or with another one in its place, and every later one,
// are not proven.
func TestProofOfEarlierCheckpoints(t *testing.T) {
	at := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	mark := func(lsn pglogrepl.LSN, xid uint32) Mark {
		return Mark{CommitLSN: lsn, Xid: xid, CommitTime: at.Add(time.Duration(xid) * time.Second)}
	}
	cp := Checkpoint{Through: 0x400, Last: &Mark{CommitLSN: 0x3F0, Xid: 40, CommitTime: at.Add(40 * time.Second)}, Earlier: []Point{
		{Through: 0x200, Last: mark(0x1F0, 20)},
		{Through: 0x100, Last: mark(0xF0, 10)}, // out of order: sorted
		{Through: 0x300, Last: mark(0x2F0, 30)},
		{Through: 0x30, Last: mark(0x20, 3)}, // at or before the slot: ignored
		{Through: 0x100, Last: mark(0xF0, 10)},
	}}
	type msg struct {
		op  string // begin, commit, walend
		lsn pglogrepl.LSN
		xid uint32
	}
	tests := []struct {
		name   string
		msgs   []msg
		proven pglogrepl.LSN // Proven().Through at the end; 0: none
	}{
		{
			name: "the first two re-sent as written, the third replaced (the copy was taken between them)",
			msgs: []msg{
				{"begin", 0xF0, 10}, {"commit", 0x100, 0},
				{"begin", 0x1F0, 20}, {"commit", 0x200, 0},
				{"begin", 0x2F0, 99}, // another transaction where the third's was
			},
			proven: 0x200,
		},
		{
			name: "the second passed without its transaction: the later ones cannot be proven either",
			msgs: []msg{
				{"begin", 0xF0, 10}, {"commit", 0x100, 0},
				{"begin", 0x1F8, 21}, {"commit", 0x208, 0},
				{"begin", 0x2F0, 30}, {"commit", 0x300, 0},
			},
			proven: 0x100,
		},
		{
			name:   "a WAL end past the first without its transaction",
			msgs:   []msg{{"walend", 0x100, 0}, {"begin", 0x1F0, 20}, {"commit", 0x200, 0}},
			proven: 0,
		},
		{
			name:   "the first's transaction ends elsewhere",
			msgs:   []msg{{"begin", 0xF0, 10}, {"commit", 0x108, 0}, {"begin", 0x1F0, 20}, {"commit", 0x200, 0}},
			proven: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r State
			if why := r.SeedFrom(cp, 0x40); why != "" {
				t.Fatal(why)
			}
			for _, m := range tc.msgs {
				switch m.op {
				case "begin":
					r.ProveBegin(mark(m.lsn, m.xid))
					r.Begin(m.lsn)
				case "commit":
					r.ProveCommit(m.lsn)
					r.Commit(m.lsn)
				case "walend":
					r.ProveWALEnd(m.lsn)
				}
			}
			p, ok := r.Proven()
			if p.Through != tc.proven || ok != (tc.proven != 0) {
				t.Errorf("Proven = %s %t, want %s", p.Through, ok, tc.proven)
			}
		})
	}
}
