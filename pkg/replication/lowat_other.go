//go:build !linux

package replication

import "syscall"

// setRcvLowat is a no-op off Linux: reads are batched by waiting alone.
func setRcvLowat(syscall.RawConn, int) error { return nil }
