package replication

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func rcvLowat(t *testing.T, rc syscall.RawConn) int {
	t.Helper()
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	}); err != nil || gerr != nil {
		t.Fatalf("getsockopt SO_RCVLOWAT: %v %v", err, gerr)
	}
	return v
}

// While a read waits after a small one, the socket's low-water mark is
// smallRead, so the walsender's messages do not wake the poller one by one;
// it is back at one byte for the read itself, so a small message arriving
// while the read blocks is delivered at once, not when smallRead bytes
// have piled up (which might be never).
func TestCoalescingReaderLowWaterMark(t *testing.T) {
	client, server := tcpPair(t)
	rc, err := client.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	const wait = 300 * time.Millisecond
	r := &coalescingReader{r: client, wait: wait, sock: rc, small: true}

	// Watch the mark while the read waits.
	raised, stop := make(chan bool, 1), make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				raised <- false
				return
			default:
			}
			if rcvLowat(t, rc) == smallRead {
				raised <- true
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// The message arrives after the wait, while the read blocks.
	time.AfterFunc(wait+100*time.Millisecond, func() {
		if _, err := server.Write([]byte("hello")); err != nil {
			t.Error(err)
		}
	})
	if err := client.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	start := time.Now()
	n, err := r.Read(buf)
	if err != nil {
		t.Fatalf("read: %v (after %s): a small message waited for the low-water mark", err, time.Since(start))
	}
	if string(buf[:n]) != "hello" {
		t.Fatalf("read %q", buf[:n])
	}
	close(stop)
	if !<-raised {
		t.Errorf("SO_RCVLOWAT was never %d during the wait", smallRead)
	}
	if got := rcvLowat(t, rc); got != 1 {
		t.Errorf("SO_RCVLOWAT after the read = %d, want 1", got)
	}
}
