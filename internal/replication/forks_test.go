package replication

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// HasWAL takes a position of an earlier timeline as this server's history
// only up to where that timeline ended (a promotion), and one of the
// server's own timeline up to its WAL position.
func TestSessionHasWAL(t *testing.T) {
	s := Session{SystemID: "1", Timeline: 3, XLogPos: 0x9000,
		Forks: map[int32]pglogrepl.LSN{1: 0x4000, 2: 0x6000}}
	for _, tc := range []struct {
		name     string
		timeline int32
		lsn      pglogrepl.LSN
		want     bool
	}{
		{"own timeline, before the WAL end", 3, 0x8000, true},
		{"own timeline, at the WAL end", 3, 0x9000, true},
		{"own timeline, past the WAL end", 3, 0x9001, false},
		{"first timeline, before its fork", 1, 0x3fff, true},
		{"first timeline, at its fork", 1, 0x4000, true},
		{"first timeline, past its fork", 1, 0x4001, false},
		{"second timeline, past the first's fork", 2, 0x5000, true},
		{"second timeline, past its fork", 2, 0x6001, false},
		{"a timeline not in the history", 4, 0x100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.HasWAL(tc.timeline, tc.lsn); got != tc.want {
				t.Errorf("HasWAL(%d, %s) = %t, want %t", tc.timeline, tc.lsn, got, tc.want)
			}
		})
	}
	if (Session{Timeline: 2, XLogPos: 0x9000}).HasWAL(1, 0x10) {
		t.Error("without a history read, an earlier timeline counts as this server's")
	}
}
