package resume

import (
	"fmt"
	"testing"

	"github.com/jackc/pglogrepl"
)

// step is one message (or session event) given to resume, with what it
// must decide.
type step struct {
	op   string // begin, insert, commit, lost, reset, state, seed
	lsn  pglogrepl.LSN
	want string // begin: BeginAction; insert: hand, pass or skip; commit: CommitAction; reset: open or idle; state: what the accessors report
	// seed: the open transaction's commit LSN and rows published (lsn is
	// through).
	open pglogrepl.LSN
	rows int
}

func seed(through, open pglogrepl.LSN, rows int) []step {
	return []step{{op: "seed", lsn: through, open: open, rows: rows}}
}

func begin(final pglogrepl.LSN, want string) []step {
	return []step{{op: "begin", lsn: final, want: want}}
}
func commit(end pglogrepl.LSN, want string) []step {
	return []step{{op: "commit", lsn: end, want: want}}
}
func lost() []step             { return []step{{op: "lost"}} }
func state(want string) []step { return []step{{op: "state", want: want}} }
func reset(want string) []step { return []step{{op: "reset", want: want}} }

// inserts is n INSERTs, each to be decided want.
func inserts(n int, want string) []step {
	s := make([]step, n)
	for i := range s {
		s[i] = step{op: "insert", want: want}
	}
	return s
}

func steps(parts ...[]step) []step {
	var all []step
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func (r *State) do(s step) string {
	switch s.op {
	case "begin":
		return r.Begin(s.lsn).String()
	case "insert":
		switch {
		case r.Skipping():
			return "skip"
		case r.Insert():
			return "hand"
		default:
			return "pass"
		}
	case "commit":
		return r.Commit(s.lsn).String()
	case "lost":
		r.Lost()
		return ""
	case "state":
		commitLSN, open := r.Open()
		return fmt.Sprintf("open=%t commit=%s handled=%d seen=%d through=%s", open, commitLSN, r.Handled(), r.Seen(), r.Through())
	case "seed":
		r.Seed(s.lsn, s.open, s.rows)
		return ""
	case "reset":
		if r.Reset() {
			return "open"
		}
		return "idle"
	}
	panic("unknown op " + s.op)
}

func TestResume(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name:  "a transaction without breaks",
			steps: steps(begin(0x10, "new"), inserts(3, "hand"), commit(0x20, "open"), begin(0x20, "new"), commit(0x30, "open")),
		},
		{
			name: "resume mid-transaction",
			steps: steps(begin(0x10, "new"), inserts(3, "hand"), lost(),
				begin(0x10, "resume"), inserts(3, "pass"), inserts(2, "hand"), commit(0x20, "open")),
		},
		{
			name: "a break before the re-sent Begin arrives",
			steps: steps(begin(0x10, "new"), inserts(3, "hand"), lost(), lost(),
				begin(0x10, "resume"), inserts(3, "pass"), inserts(2, "hand"), commit(0x20, "open")),
		},
		{
			name: "second break before the first break point",
			steps: steps(begin(0x10, "new"), inserts(5, "hand"), lost(),
				begin(0x10, "resume"), inserts(2, "pass"), lost(),
				begin(0x10, "resume"), inserts(5, "pass"), inserts(3, "hand"), commit(0x20, "open")),
		},
		{
			name: "second break right after the resumed Begin",
			steps: steps(begin(0x10, "new"), inserts(5, "hand"), lost(),
				begin(0x10, "resume"), lost(),
				begin(0x10, "resume"), inserts(5, "pass"), inserts(1, "hand"), commit(0x20, "open")),
		},
		{
			name: "what the accessors report across a break",
			steps: steps(state("open=false commit=0/0 handled=0 seen=0 through=0/0"),
				begin(0x10, "new"), inserts(3, "hand"), state("open=true commit=0/10 handled=3 seen=3 through=0/0"),
				lost(), begin(0x10, "resume"), inserts(1, "pass"), state("open=true commit=0/10 handled=3 seen=1 through=0/0"),
				inserts(2, "pass"), inserts(1, "hand"), state("open=true commit=0/10 handled=4 seen=4 through=0/0"),
				commit(0x20, "open"), state("open=false commit=0/10 handled=0 seen=0 through=0/20"),
				reset("idle"), state("open=false commit=0/0 handled=0 seen=0 through=0/0")),
		},
		{
			name: "second break after the first break point",
			steps: steps(begin(0x10, "new"), inserts(5, "hand"), lost(),
				begin(0x10, "resume"), inserts(5, "pass"), inserts(3, "hand"), lost(),
				begin(0x10, "resume"), inserts(8, "pass"), inserts(2, "hand"), commit(0x20, "open")),
		},
		{
			name: "a different transaction first",
			steps: steps(begin(0x10, "new"), inserts(3, "hand"), lost(),
				begin(0x30, "replace"), inserts(2, "hand"), commit(0x40, "open"), commit(0x50, "none")),
		},
		{
			name: "re-sent committed transactions are skipped",
			steps: steps(begin(0x10, "new"), inserts(2, "hand"), commit(0x20, "open"),
				begin(0x20, "new"), inserts(1, "hand"), commit(0x28, "open"),
				begin(0x30, "new"), inserts(2, "hand"), lost(),
				begin(0x10, "replay"), inserts(2, "skip"), commit(0x20, "replayed"),
				begin(0x20, "replay"), inserts(1, "skip"), commit(0x28, "replayed"),
				begin(0x30, "resume"), inserts(2, "pass"), inserts(1, "hand"), commit(0x40, "open")),
		},
		{
			name: "a break while replaying",
			steps: steps(begin(0x10, "new"), inserts(2, "hand"), commit(0x20, "open"), lost(),
				begin(0x10, "replay"), inserts(1, "skip"), lost(),
				begin(0x10, "replay"), inserts(2, "skip"), commit(0x20, "replayed"),
				begin(0x20, "new"), inserts(1, "hand"), commit(0x30, "open")),
		},
		{
			name: "identity reset with a transaction open",
			steps: steps(begin(0x100, "new"), inserts(2, "hand"), commit(0x200, "open"),
				begin(0x300, "new"), inserts(2, "hand"), lost(), reset("open"),
				// The new server's LSNs are lower: nothing of it is a replay.
				begin(0x10, "new"), inserts(2, "hand"), commit(0x20, "open"),
				begin(0x300, "new"), inserts(1, "hand"), commit(0x400, "open")),
		},
		{
			name: "seeded from a checkpoint: transactions before it are skipped, the open one resumes",
			steps: steps(seed(0x100, 0x180, 3),
				begin(0x10, "replay"), inserts(2, "skip"), commit(0x20, "replayed"),
				begin(0x80, "replay"), inserts(1, "skip"), commit(0x100, "replayed"),
				begin(0x180, "new"), inserts(3, "pass"), inserts(2, "hand"), state("open=true commit=0/180 handled=5 seen=5 through=0/100"),
				commit(0x200, "open"), begin(0x200, "new"), inserts(1, "hand"), commit(0x210, "open")),
		},
		{
			name: "seeded: a session lost inside the open transaction passes over the same rows",
			steps: steps(seed(0x100, 0x180, 3),
				begin(0x180, "new"), inserts(3, "pass"), inserts(1, "hand"), lost(),
				begin(0x180, "resume"), inserts(4, "pass"), inserts(1, "hand"), commit(0x200, "open")),
		},
		{
			name: "seeded: the open transaction not first (the checkpoint's rows apply to it alone)",
			steps: steps(seed(0x100, 0x180, 3),
				begin(0x100, "new"), inserts(2, "hand"), commit(0x140, "open"),
				begin(0x180, "new"), inserts(2, "hand"), commit(0x200, "open")),
		},
		{
			name:  "seeded without an open transaction",
			steps: steps(seed(0x100, 0, 0), begin(0xF0, "replay"), commit(0x100, "replayed"), begin(0x100, "new"), inserts(1, "hand"), commit(0x110, "open")),
		},
		{
			name: "identity reset while idle",
			steps: steps(begin(0x100, "new"), inserts(1, "hand"), commit(0x200, "open"), lost(), reset("idle"),
				begin(0x100, "new"), inserts(1, "hand"), commit(0x200, "open")),
		},
		{
			name: "identity reset while replaying",
			steps: steps(begin(0x100, "new"), inserts(1, "hand"), commit(0x200, "open"), lost(),
				begin(0x100, "replay"), lost(), reset("idle"),
				begin(0x100, "new"), inserts(1, "hand"), commit(0x200, "open")),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r State
			var trace []string
			for i, s := range tc.steps {
				got := r.do(s)
				trace = append(trace, fmt.Sprintf("%s %s=%s", s.op, s.lsn, got))
				if got != s.want {
					t.Fatalf("step %d (%s %s): got %q, want %q\ntrace: %q", i, s.op, s.lsn, got, s.want, trace)
				}
			}
		})
	}
}
