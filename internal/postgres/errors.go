package postgres

import "errors"

// Sentinel errors. Each is returned wrapped in a message that names what
// is involved and says how to fix it; test with errors.Is.
var (
	// ErrMalformedLSN: a string is not an LSN of the form 0/16B3748.
	ErrMalformedLSN = errors.New("malformed LSN")
	// ErrBadName: a slot name is not 1-63 lowercase letters, digits and
	// underscores.
	ErrBadName = errors.New("invalid name")
	// ErrConnect: the server could not be reached or refused the session.
	ErrConnect = errors.New("cannot connect to postgres")
	// ErrAuth: the server rejected the credentials or the role.
	ErrAuth = errors.New("postgres rejected the login")
	// ErrPrivilege: the role lacks a privilege the action needs.
	ErrPrivilege = errors.New("permission denied")
	// ErrSlotNotFound: no replication slot has this name.
	ErrSlotNotFound = errors.New("replication slot does not exist")
	// ErrSlotExists: CreateSlot found a slot with this name already.
	ErrSlotExists = errors.New("replication slot already exists")
	// ErrSlotMismatch: the slot uses another plugin than pgoutput or
	// belongs to another database.
	ErrSlotMismatch = errors.New("replication slot is not usable by walrelay")
	// ErrSlotActive: a process holds the slot (Postgres refuses to peek,
	// advance or drop it).
	ErrSlotActive = errors.New("replication slot is in use")
	// ErrStandbyTooOld: the server is a hot standby older than Postgres
	// 16, which cannot decode (logical decoding on a standby came in 16).
	ErrStandbyTooOld = errors.New("logical decoding on a standby needs PostgreSQL 16 or newer")
	// ErrFailoverUnsupported: postgres.slot_failover=true, and the server
	// cannot have a failover slot (older than PostgreSQL 17, or a standby).
	ErrFailoverUnsupported = errors.New("failover slots are not supported here")
)
