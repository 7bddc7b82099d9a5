package localpg

import "errors"

// Sentinel errors returned by this package. Match them with errors.Is.
var (
	// ErrBinariesNotFound is returned by Start when no directory holding
	// the Postgres server binaries (initdb, pg_ctl, postgres) can be found.
	// Callers such as the test environment use it to decide whether another
	// backend (a container) should be tried.
	ErrBinariesNotFound = errors.New("postgres server binaries not found")

	// ErrClosed is returned by Stop and Restart after Close.
	ErrClosed = errors.New("localpg cluster is closed")

	// ErrBadStopMode is returned by Stop for a mode other than "smart",
	// "fast" or "immediate".
	ErrBadStopMode = errors.New("invalid pg_ctl stop mode")
)
