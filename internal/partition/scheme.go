package partition

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
)

// maxIdentifier is Postgres's identifier limit in bytes (NAMEDATALEN - 1):
// a longer name is truncated silently, and two partitions could then get
// the same name.
const maxIdentifier = 63

// Scheme is how an outbox is cut into partitions: which table, on which
// column, how wide each partition is. Build it with NewScheme, which
// checks every name it can produce fits Postgres's identifier limit.
type Scheme struct {
	Schema, Table string        // the partitioned root
	Column        string        // the partition key: outbox.time_column
	Interval      time.Duration // each partition's width, whole hours
}

// NewScheme returns the scheme for table (postgres.table's form: "schema.
// table" or "table"), partitioned on column in partitions of interval. It
// fails when interval is not a whole number of hours, or when a partition
// name would be longer than 63 bytes (Postgres would truncate it).
func NewScheme(table, column string, interval time.Duration) (Scheme, error) {
	schema, name, err := config.SplitTable(table)
	if err != nil {
		return Scheme{}, fmt.Errorf("postgres.table %q: %w", table, err)
	}
	if column == "" {
		return Scheme{}, errors.New("outbox.time_column is empty: name the outbox's timestamptz column")
	}
	if interval < time.Hour || interval%time.Hour != 0 {
		return Scheme{}, fmt.Errorf("outbox.partition_interval %s: must be a whole number of hours, at least 1h", interval)
	}
	s := Scheme{Schema: schema, Table: name, Column: column, Interval: interval}
	if n := s.Name(time.Unix(0, 0)); len(n) > maxIdentifier {
		return Scheme{}, fmt.Errorf("partition names of postgres.table %q would be %d bytes (like %q), over Postgres's limit of %d: shorten the table's name to at most %d bytes",
			table, len(n), n, maxIdentifier, maxIdentifier-(len(n)-len(name)))
	}
	return s, nil
}

// Start returns the start of the partition holding t: t rounded down to a
// multiple of the interval since the Unix epoch, in UTC. UTC has no
// daylight saving time, so every partition is exactly Interval wide.
func (s Scheme) Start(t time.Time) time.Time {
	step := int64(s.Interval / time.Second)
	sec := t.Unix()
	start := sec - sec%step
	if sec%step < 0 { // before 1970: round down, not towards zero
		start -= step
	}
	return time.Unix(start, 0).UTC()
}

// Name returns the name of the partition starting at start (a value Start
// returned): <table>_p20261125 when the interval is whole days,
// <table>_p20261125T06 otherwise.
func (s Scheme) Name(start time.Time) string {
	start = start.UTC()
	if s.Interval%(24*time.Hour) == 0 {
		return s.Table + "_p" + start.Format("20060102")
	}
	return s.Table + "_p" + start.Format("20060102T15")
}

// Partition returns the partition starting at start as this scheme makes
// it.
func (s Scheme) Partition(start time.Time) Partition {
	start = start.UTC()
	return Partition{Schema: s.Schema, Name: s.Name(start), From: start, To: start.Add(s.Interval)}
}

// literal is a bound as a timestamptz literal in UTC.
func literal(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02 15:04:05") + "+00'"
}

// CreateStatement returns the idempotent DDL that creates the partition
// starting at start: CREATE TABLE IF NOT EXISTS <schema>.<name> PARTITION
// OF <root> FOR VALUES FROM ('<start>+00') TO ('<start+interval>+00').
func (s Scheme) CreateStatement(start time.Time) string {
	p := s.Partition(start)
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)",
		pgx.Identifier{p.Schema, p.Name}.Sanitize(), s.root(), literal(p.From), literal(p.To))
}

// root is the root table, quoted.
func (s Scheme) root() string { return pgx.Identifier{s.Schema, s.Table}.Sanitize() }

// qualified is schema.table as postgres.table writes it.
func (s Scheme) qualified() string { return s.Schema + "." + s.Table }

// String describes the scheme for logs: "public.outbox by range of
// created_at, 24h partitions".
func (s Scheme) String() string {
	return fmt.Sprintf("%s by range of %s, %s partitions", s.qualified(), s.Column, strings.TrimSuffix(strings.TrimSuffix(s.Interval.String(), "0s"), "0m"))
}
