//go:build !race

package pgwire

import (
	"syscall"
	"unsafe"
)

// readOnce is one read(2) of fd into p, as a raw system call: the Go
// scheduler is not told about it (see Reader), and neither is the race
// detector, which instruments only reads done through package syscall or
// net. rawread_race_linux.go is the variant race-detector builds use.
func readOnce(fd uintptr, p []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(r), e
}
