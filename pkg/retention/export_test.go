package retention

import "strings"

// PrecedesFenceSQL is the predicate deciding a row's xmin precedes a
// fence, with xmin replaced by $1 (a bigint) and its parameters shifted:
// $2 = the fence's xmin mod 2^32, $3 = the window (snapshot xmax − fence
// xmin).
var PrecedesFenceSQL = strings.ReplaceAll(strings.ReplaceAll(precedesFenceSQL, "%%", "%"), "xmin::text::bigint", "$1::bigint")
