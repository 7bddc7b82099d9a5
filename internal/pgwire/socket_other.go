//go:build !linux

package pgwire

import (
	"errors"
	"syscall"
)

// lowatWaits reports whether waitQueued and rawRead work here: off Linux,
// reads are batched by sleeping alone, and go through net.Conn.
const lowatWaits = false

func waitQueued(syscall.RawConn, int, *int) (bool, error) {
	return false, errors.New("waiting for queued bytes is only implemented on Linux")
}

func rawRead(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("raw reads are only implemented on Linux")
}
