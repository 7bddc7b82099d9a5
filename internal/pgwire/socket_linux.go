// Waiting on the socket for a batch of bytes, on Linux. The socket calls
// are raw system calls, like rawRead's (see Reader for why).

package pgwire

import (
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lowatWaits reports whether waitQueued and rawRead work here.
const lowatWaits = true

// waitQueued blocks until the socket holds at least n bytes, or until its
// read deadline passes (os.ErrDeadlineExceeded). While it waits, the
// socket's receive low-water mark (SO_RCVLOWAT) is n: the kernel signals
// the socket readable, and so wakes the Go network poller, only once n
// bytes are queued, not for every message that arrives. The mark is back
// at one byte when it returns, so a read that blocks afterwards wakes on
// the first byte. It reports whether it waited at all (fewer than n bytes
// were queued at first); wakes counts the times the poller woke it (for
// tests).
func waitQueued(rc syscall.RawConn, n int, wakes *int) (waited bool, err error) {
	if err := setRcvLowat(rc, n); err != nil {
		return false, err
	}
	var qerr error
	err = rc.Read(func(fd uintptr) bool {
		*wakes++
		// A readiness signalled before the mark was raised ends the
		// first wait at once: count what is queued.
		var q int32
		if _, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, fd, unix.SIOCINQ, uintptr(unsafe.Pointer(&q))); e != 0 {
			qerr = os.NewSyscallError("ioctl SIOCINQ", e)
			return true
		}
		if int(q) >= n {
			return true
		}
		waited = true
		return false
	})
	if lerr := setRcvLowat(rc, 1); lerr != nil {
		return waited, lerr
	}
	if err != nil {
		return waited, err
	}
	return waited, qerr
}

// setRcvLowat sets the socket's receive low-water mark (SO_RCVLOWAT), with
// a raw system call.
func setRcvLowat(rc syscall.RawConn, n int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		v := int32(n)
		if _, _, e := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, uintptr(unsafe.Pointer(&v)), 4, 0); e != 0 {
			serr = os.NewSyscallError("setsockopt SO_RCVLOWAT", e)
		}
	}); err != nil {
		return err
	}
	return serr
}

// rawRead reads the socket like net.Conn's Read (deadlines included, and
// io.EOF at the end of the stream), calling readOnce when the socket is
// readable. readOnce is a raw read(2) in normal builds (rawread_linux.go)
// and one the race detector sees in -race builds (rawread_race_linux.go).
func rawRead(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := rc.Read(func(fd uintptr) bool {
		for {
			r, e := readOnce(fd, p)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = r, e
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, os.NewSyscallError("read", errno)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}
