package txfence

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// XminExpr is the row's xmin as the bigint PrecedesSQL compares: its 32
// bits (the system column xmin is a 32-bit xid).
const XminExpr = "xmin::text::bigint"

// PrecedesSQL returns the predicate "the 32-bit xid xmin (a bigint SQL
// expression, XminExpr for a row's) precedes the fence's xmin X", given
// the SQL expressions x32 (X mod 2^32) and window (W: the xmax of the
// statement's snapshot − X), which Window computes: the xid is outside
// [X, X+W) modulo 2^32, or is one of the permanent xids 0-2 (bootstrap,
// frozen), which precede every other. X+W is above every xid a row the
// snapshot sees can have, so this is exact for every visible row but for
// ancient (frozen) rows whose 32 bits happen to fall in the window: those
// are taken as not preceding, the safe side (docs/DESIGN.md,
// "Retention", the fence, claim 5).
func PrecedesSQL(xmin, x32, window string) string {
	return `(` + xmin + ` < 3 OR (` + xmin + ` - ` + x32 + ` + 4294967296) % 4294967296 >= ` + window + `)`
}

// Window reads the xmax of q's snapshot (a REPEATABLE READ transaction's,
// so that every statement in it sees the same) and returns PrecedesSQL's
// x32 and window for fence f. The snapshot must be taken after f, on the
// same server.
func Window(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, f Fence) (x32, window int64, err error) {
	var s string
	if err := q.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&s); err != nil {
		return 0, 0, fmt.Errorf("reading the snapshot's xmax: %w", err)
	}
	xmax, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parsing snapshot xmax %q: %w", s, err)
	}
	if xmax < f.Xmin || xmax-f.Xmin >= 1<<31 {
		return 0, 0, fmt.Errorf("snapshot xmax %d is not within 2^31 after the fence's xmin %d: the fence is not of this server's history", xmax, f.Xmin)
	}
	return int64(f.Xmin % (1 << 32)), int64(xmax - f.Xmin), nil
}
