package inbox

import "errors"

// Sentinel errors.
var (
	// ErrInvalidConfig is returned by New and Consume for a configuration
	// they cannot work with; the message names the field and value.
	ErrInvalidConfig = errors.New("invalid inbox config")
	// ErrNoEventID is returned by Process (and stops Consume) for a record
	// without the event id header: it cannot be deduplicated, and it is
	// not skipped silently either.
	ErrNoEventID = errors.New("record has no event id header")
)
