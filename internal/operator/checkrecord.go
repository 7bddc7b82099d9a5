package operator

import (
	"errors"
	"fmt"

	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// recordLocation runs the "slot record" item: walrelay reads and writes
// the slot's record (walrelay_slot_positions) in the schema of
// postgres.table's first table, and a record of the slot in the schema of
// another listed table means the list was reordered. walrelay would then
// read the record as missing and start the slot without the proof it
// holds, so the item fails, with the order that finds it again.
func (c *checker) recordLocation() {
	const name = "slot record"
	want, slot := c.cfg.Postgres.RecordSchema(), c.cfg.Postgres.Slot
	err := slotrecord.Locate(c.ctx, c.conn, want, c.cfg.Postgres.Schemas(), slot)
	var misplaced *slotrecord.MisplacedError
	switch {
	case errors.As(err, &misplaced):
		c.fail(name, misplaced.Error(), fmt.Sprintf("reorder postgres.table so that a table of schema %s comes first (%s)", misplaced.Found, c.firstIn(misplaced.Found)))
	case err != nil:
		c.fail(name, postgres.QueryError("looking for slot "+slot+"'s record", "", err).Error(), "")
	default:
		c.ok(name, fmt.Sprintf("slot %s's record is read and written in %s.%s (the schema of postgres.table's first table)", slot, want, slotrecord.TableName))
	}
}

// firstIn is the first listed table of schema, as postgres.table writes it.
func (c *checker) firstIn(schema string) string {
	for _, t := range c.tables {
		if t.Schema == schema {
			return t.String()
		}
	}
	return schema
}
