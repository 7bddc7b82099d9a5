package slotrecord

import (
	"context"
	"fmt"
	"slices"
)

// MisplacedError is returned by Locate when the slot's record is not in the
// schema walrelay looks in (the first table of postgres.table's) but in the
// schema of another listed table: the list was reordered. Left unchecked, the
// record would read as missing, and a relay or setup would start the slot
// afresh without the proof it holds (a jump it recorded, a fence retention
// relies on).
type MisplacedError struct {
	Slot  string
	Found string // the schema holding the record
	Want  string // the record schema: the first listed table's
}

func (e *MisplacedError) Error() string {
	return fmt.Sprintf("slot %q is recorded in %s.%s, but postgres.table lists a table of schema %s first: list a table of schema %s first",
		e.Slot, e.Found, TableName, e.Want, e.Found)
}

// Locate checks that slot's record, if it has one in any of schemas, is in
// want, where walrelay reads and writes it. It returns a *MisplacedError when
// want holds no record of slot but another of schemas does. With want alone
// (every listed table in one schema) it does nothing.
func Locate(ctx context.Context, q Querier, want string, schemas []string, slot string) error {
	seen := map[string]bool{want: true}
	var others []string
	for _, s := range schemas {
		if !seen[s] {
			seen[s] = true
			others = append(others, s)
		}
	}
	if len(others) == 0 {
		return nil
	}
	has := func(schema string) (bool, error) {
		t := Table{Schema: schema}
		ok, err := t.Exists(ctx, q)
		if err != nil || !ok {
			return false, err
		}
		err = q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+t.quoted()+` WHERE slot_name = $1)`, slot).Scan(&ok)
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", t, err)
		}
		return ok, nil
	}
	if ok, err := has(want); err != nil || ok {
		return err
	}
	slices.Sort(others)
	for _, s := range others {
		ok, err := has(s)
		if err != nil {
			return err
		}
		if ok {
			return &MisplacedError{Slot: slot, Found: s, Want: want}
		}
	}
	return nil
}
