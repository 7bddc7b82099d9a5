//go:build race

package pgwire

import (
	"errors"
	"syscall"
)

// readOnce is one read(2) of fd into p through syscall.Read, which tells
// the race detector that p[:n] was written. A raw read(2) is invisible to
// it: a caller writing into a receive buffer that someone still uses
// without holding it would go unreported. This build is slower (the
// scheduler sees the call), which does not matter under -race.
func readOnce(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	if err != nil {
		var e syscall.Errno
		if !errors.As(err, &e) {
			return 0, syscall.EIO
		}
		return 0, e
	}
	return n, 0
}
