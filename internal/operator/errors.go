package operator

import "errors"

// Sentinel errors of peek and advance, besides internal/postgres's (a
// missing, mismatched or busy slot). Each is returned wrapped in a message
// that names what is involved and says how to fix it; test with
// errors.Is.
var (
	// ErrRefused: Advance would move the slot backwards or past the
	// server's current WAL end, or the slot moved while planning.
	ErrRefused = errors.New("refusing to move the slot")
	// ErrEventNotFound: the outbox event id is not pending in the slot.
	ErrEventNotFound = errors.New("outbox event not pending in the slot")
)
