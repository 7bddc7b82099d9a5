package txfence_test

import (
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/txfence"
)

// The 32-bit xmin test, evaluated by Postgres, around the wraparound of
// 32-bit xids: a row's full xid F precedes the fence's xmin X exactly when
// its 32 bits lie outside [X, X+W) modulo 2^32 (W: snapshot xmax − X);
// the permanent xids 0-2 precede everything. An ancient (frozen) xid whose
// 32 bits fall in the window is kept: the safe side.
func TestPrecedesFenceAcrossWraparound(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t).NewDatabase(t)
	const two32 = int64(1) << 32
	for _, tc := range []struct {
		name      string
		full, x   int64 // the row's full xid and the fence's xmin (64-bit)
		window    int64
		precedes  bool
		rationale string
	}{
		{"just before", 999, 1000, 50, true, "F < X"},
		{"at the fence", 1000, 1000, 50, false, "F = X: running at the snapshot"},
		{"inside the window", 1049, 1000, 50, false, "X ≤ F < xmax"},
		{"epoch below, wrapped", two32 - 10, two32 + 5, 50, true, "F < X across the 32-bit wrap"},
		{"fence just below the wrap, row just above", two32 + 3, two32 - 5, 20, false, "X ≤ F < xmax across the wrap"},
		{"fence just below the wrap, row below it", two32 - 6, two32 - 5, 20, true, "F < X"},
		{"ancient frozen xid outside the window", 5000 - two32, 10000, 100, true, "F < X, 32 bits outside the window"},
		{"ancient frozen xid in the window", 10050 - two32, 10000, 100, false, "32 bits collide with the window: kept"},
		{"permanent frozen xid", 2, 10000, 100, true, "FrozenTransactionId precedes everything"},
	} {
		x32 := tc.full % two32
		if x32 < 0 {
			x32 += two32
		}
		got := testenv.QueryValue[bool](t, dsn, `SELECT `+txfence.PrecedesSQL("$1::bigint", "$2", "$3"), x32, tc.x%two32, tc.window)
		if got != tc.precedes {
			t.Errorf("%s: row xid %d (32 bits %d), fence xmin %d, window %d: precedes = %t, want %t (%s)", tc.name, tc.full, x32, tc.x, tc.window, got, tc.precedes, tc.rationale)
		}
	}
}
