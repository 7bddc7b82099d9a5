package replication

import "syscall"

// setRcvLowat sets the socket's receive low-water mark (SO_RCVLOWAT): the
// kernel signals it readable, and so wakes the Go network poller, only once
// n bytes are queued. A read still returns whatever is queued.
func setRcvLowat(rc syscall.RawConn, n int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
