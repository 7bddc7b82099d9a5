package replication

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// lowatWaits reports whether waitQueued works here.
const lowatWaits = true

// waitQueued blocks until the socket holds at least n bytes, or until its
// read deadline passes (os.ErrDeadlineExceeded). While it waits, the
// socket's receive low-water mark (SO_RCVLOWAT) is n: the kernel signals
// the socket readable, and so wakes the Go network poller, only once n
// bytes are queued, not for every message that arrives. The mark is back
// at one byte when it returns, so a read that blocks afterwards wakes on
// the first byte. wakes counts the times the poller woke it (for tests).
func waitQueued(rc syscall.RawConn, n int, wakes *int) error {
	if err := setRcvLowat(rc, n); err != nil {
		return err
	}
	var qerr error
	err := rc.Read(func(fd uintptr) bool {
		*wakes++
		// A readiness signalled before the mark was raised ends the
		// first wait at once: count what is queued.
		q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err != nil {
			qerr = err
			return true
		}
		return q >= n
	})
	if lerr := setRcvLowat(rc, 1); lerr != nil {
		return lerr
	}
	if err != nil {
		return err
	}
	return qerr
}

// setRcvLowat sets the socket's receive low-water mark (SO_RCVLOWAT).
func setRcvLowat(rc syscall.RawConn, n int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
