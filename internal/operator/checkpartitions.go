package operator

import (
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/postgres"
)

// This file holds the preflight's "outbox partitions" item.

// outboxPartitions runs the "outbox partitions" item of each listed table
// that exists.
func (c *checker) outboxPartitions() {
	for _, t := range c.existing() {
		c.outboxPartitionsOf(t)
	}
}

// outboxPartitionsOf reports how t is stored: a plain table, or
// partitioned with its partitions counted (internal/partition's List). It fails
// when no partition holds now and there is no DEFAULT partition (the
// application's INSERTs fail), and warns when fewer than
// outbox.partitions_ahead partitions lie ahead of now, when a DEFAULT
// partition takes now's rows, when the table is partitioned otherwise
// than by range of outbox.time_column, and when outbox.partitioned is set
// but the table is plain.
func (c *checker) outboxPartitionsOf(t *outboxTable) {
	name := c.itemName("outbox partitions", t)
	layout, err := partition.Inspect(c.ctx, c.conn, t.String())
	if err != nil {
		c.fail(name, postgres.QueryError("reading how "+t.String()+" is stored", "", err).Error(), "")
		return
	}
	t.partitioned = layout.Partitioned
	col := c.cfg.Outbox.TimeColumn
	switch {
	case !layout.Partitioned && c.cfg.Outbox.Partitioned:
		c.warn(name, "plain table, although outbox.partitioned is set (walrelay setup does not convert an existing table)",
			"set outbox.partitioned=false, or move to a partitioned outbox (docs/runbook.md)")
		return
	case !layout.Partitioned:
		c.ok(name, "plain table")
		return
	case !layout.RangeOn(col):
		c.warn(name, fmt.Sprintf("%s, not by range of outbox.time_column %q: walrelay does not create its partitions", layout, col),
			"create its partitions yourself, or set outbox.time_column to its partition key")
		return
	}
	parts, err := partition.List(c.ctx, c.conn, t.String())
	if err != nil {
		c.fail(name, postgres.QueryError("listing the partitions of "+t.String(), "", err).Error(), "")
		return
	}
	now := time.Now()
	var (
		holds, hasDefault bool
		ahead             int
		upTo              time.Time
	)
	for _, p := range parts {
		switch {
		case p.Default:
			hasDefault = true
			continue
		case p.Holds(now):
			holds = true
		case p.From.After(now):
			ahead++
		}
		if p.To.After(upTo) {
			upTo = p.To
		}
	}
	detail := fmt.Sprintf("partitioned by range of %s with %d partitions", col, len(parts))
	if !upTo.IsZero() {
		detail += " up to " + partitionBound(upTo)
	}
	if hasDefault {
		detail += ", one of them DEFAULT"
	}
	const create = "run `walrelay setup --outbox.partitioned=true` as the table's owner (it creates the partition of now and outbox.partitions_ahead more), and check walrelay run's log for \"could not create the outbox's partitions ahead\" (docs/runbook.md, \"No partition for now\")"
	switch {
	case !holds && !hasDefault:
		c.fail(name, detail+fmt.Sprintf("; none holds now (%s): INSERTs into the outbox fail", now.UTC().Format(time.RFC3339)), create)
	case !holds:
		c.warn(name, detail+"; none but the DEFAULT partition holds now: a partition of a range the DEFAULT partition holds rows of cannot be created", create+"; move the DEFAULT partition's rows out first")
	case ahead < c.cfg.Outbox.PartitionsAhead:
		c.warn(name, detail+fmt.Sprintf("; %d ahead of now, fewer than outbox.partitions_ahead (%d)", ahead, c.cfg.Outbox.PartitionsAhead), create)
	default:
		c.ok(name, detail+fmt.Sprintf("; %d ahead of now", ahead))
	}
}

// partitionBound prints an upper bound: a time, or MAXVALUE.
func partitionBound(t time.Time) string {
	if t.Year() > 9999 {
		return "MAXVALUE"
	}
	return t.UTC().Format(time.RFC3339)
}
