package outbox

import "errors"

// Sentinel errors. New wraps ErrInvalidConfig with the field and value at
// fault; Emit and EmitSQL wrap ErrInvalidEvent with the field at fault
// before anything is sent to Postgres, so the transaction is untouched.
var (
	// ErrInvalidConfig is returned by New for a Config it cannot write with.
	ErrInvalidConfig = errors.New("invalid outbox config")
	// ErrInvalidEvent is returned by Emit and EmitSQL for an Event that
	// walrelay could not route or the table could not hold.
	ErrInvalidEvent = errors.New("invalid outbox event")
)
