package pgwire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
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

// ownedReader returns a Reader of client as Hijack sets it
// up for plain TCP (own), with the last read small, so the next one
// waits.
func ownedReader(ctx context.Context, client *net.TCPConn, wait time.Duration) *Reader {
	r := NewReader(ctx, client, client, wait)
	r.own(client)
	r.small = true
	return r
}

// rawRead reads like net.Conn's Read: what is queued, at most len(p);
// blocking until data arrives; the read deadline; io.EOF once the peer has
// closed.
func TestRawRead(t *testing.T) {
	client, server := tcpPair(t)
	rc, err := client.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write([]byte("hello, walsender")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := rawRead(rc, buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("rawRead = %q, %v; want \"hello\"", buf[:n], err)
	}
	buf = make([]byte, 64)
	if n, err := rawRead(rc, buf); err != nil || string(buf[:n]) != ", walsender" {
		t.Fatalf("rawRead = %q, %v; want the rest", buf[:n], err)
	}

	// Nothing queued: it blocks until data arrives...
	time.AfterFunc(100*time.Millisecond, func() { _, _ = server.Write([]byte("late")) })
	if n, err := rawRead(rc, buf); err != nil || string(buf[:n]) != "late" {
		t.Fatalf("rawRead = %q, %v; want \"late\"", buf[:n], err)
	}
	// ...or until the deadline...
	if err := client.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := rawRead(rc, buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("rawRead past the deadline = %q, %v; want the deadline", buf[:n], err)
	}
	if err := client.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	// ...and reports the end of the stream.
	server.Close()
	if n, err := rawRead(rc, buf); err != io.EOF {
		t.Fatalf("rawRead after close = %q, %v; want io.EOF", buf[:n], err)
	}
}

// readAsync reads once from r in a goroutine; the result arrives on the
// channel.
func readAsync(r *Reader, buf []byte) <-chan readResult {
	done := make(chan readResult, 1)
	go func() {
		n, err := r.Read(buf)
		done <- readResult{n, err}
	}()
	return done
}

type readResult struct {
	n   int
	err error
}

// await returns the read's result, failing the test if it has not
// returned within a minute: far less than the waits these tests set,
// far more than the test needs.
func await(t *testing.T, done <-chan readResult) readResult {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(time.Minute):
		t.Fatal("the read is still waiting after a minute")
		return readResult{}
	}
}

// While a read waits after a small one, the socket's low-water mark is
// smallRead, so the walsender's messages do not wake the poller one by one;
// it is back at one byte for the read itself, so a small message arriving
// while the read blocks is delivered at once, not when smallRead bytes
// have piled up (which might be never).
func TestReaderLowWaterMark(t *testing.T) {
	client, server := tcpPair(t)
	rc, err := client.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	const wait = 300 * time.Millisecond
	r := ownedReader(t.Context(), client, wait)
	if r.sock == nil {
		t.Fatal("a TCP connection's reader does not watch its socket")
	}

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
	if err := r.setDeadline(time.Now().Add(5 * time.Second)); err != nil {
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

// A wait ends once smallRead bytes are queued, however long it could have
// lasted, and the messages that arrive before then, one at a time, do not
// wake it one by one.
func TestReaderWaitEndsWhenBatchQueued(t *testing.T) {
	client, server := tcpPair(t)
	r := ownedReader(t.Context(), client, time.Hour)
	const msgs = 64
	msg := bytes.Repeat([]byte("m"), smallRead/msgs)
	go func() {
		for range msgs {
			if _, err := server.Write(msg); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	res := await(t, readAsync(r, make([]byte, 2*smallRead)))
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.n != smallRead {
		t.Errorf("the read after the wait got %d bytes, want all %d", res.n, smallRead)
	}
	// One check on entry (often a readiness left from before the wait),
	// one when the mark is reached; a wake-up per message would be ~64.
	if r.wakes > 3 {
		t.Errorf("the wait woke %d times for %d messages", r.wakes, msgs)
	}
}

// A wait ends at the stream's read deadline, which the read then reports,
// as a read without a wait would; the stream's next deadline applies to
// the next read.
func TestReaderWaitEndsAtStreamDeadline(t *testing.T) {
	client, server := tcpPair(t)
	r := ownedReader(t.Context(), client, time.Hour)
	if _, err := server.Write([]byte("small")); err != nil {
		t.Fatal(err)
	}
	if err := r.setDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	res := await(t, readAsync(r, buf))
	if !errors.Is(res.err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %q, %v; want the deadline", buf[:res.n], res.err)
	}
	if err := r.setDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	r.wait = 0 // the failed read was small: no second wait
	res = await(t, readAsync(r, buf))
	if res.err != nil || string(buf[:res.n]) != "small" {
		t.Fatalf("read with the next deadline: %q, %v; want the queued message", buf[:res.n], res.err)
	}
}

// Only a read that follows a wait on the socket is raw: a stream that is
// behind reads through net.Conn, so that the scheduler, which sees that
// system call, can hand its P to the producer's goroutines and poll the
// network while the stream works flat out.
func TestReaderReadsRawOnlyAfterWaiting(t *testing.T) {
	client, server := tcpPair(t)
	r := ownedReader(t.Context(), client, 200*time.Millisecond)
	if !r.raw {
		t.Fatal("the reader of a plain TCP connection never reads raw")
	}
	buf := make([]byte, 4*smallRead)
	batch := bytes.Repeat([]byte("b"), 2*smallRead)
	read := func(what string, wantRaw int) {
		t.Helper()
		res := await(t, readAsync(r, buf))
		if res.err != nil {
			t.Fatalf("%s: %v", what, res.err)
		}
		if r.rawReads != wantRaw {
			t.Fatalf("%s: %d raw reads so far, want %d", what, r.rawReads, wantRaw)
		}
	}

	// Behind: the last read got a full batch, so no wait.
	r.small = false
	if _, err := server.Write(batch); err != nil {
		t.Fatal(err)
	}
	read("a read after a full one", 0)
	// A batch already queued when the wait starts: no wait either.
	r.small = true
	if _, err := server.Write(batch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let it all arrive
	read("a read with a batch queued", 0)
	// Keeping up: the wait waits, and the read after it is raw.
	r.small = true
	time.AfterFunc(50*time.Millisecond, func() { _, _ = server.Write([]byte("small")) })
	read("a read after a wait", 1)
}

// A wait ends when the session's context is done, and the read does not
// block afterwards: the context's wake-up (a read deadline of now, as
// Hijack sets it) was overwritten by the wait putting back the
// stream's deadline.
func TestReaderWaitEndsWhenContextDone(t *testing.T) {
	client, _ := tcpPair(t)
	ctx, cancel := context.WithCancel(t.Context())
	r := ownedReader(ctx, client, time.Hour)
	stop := context.AfterFunc(ctx, func() { _ = client.SetReadDeadline(time.Now()) })
	defer stop()
	time.AfterFunc(100*time.Millisecond, cancel)
	res := await(t, readAsync(r, make([]byte, 64)))
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("read: %d bytes, %v; want the context's error", res.n, res.err)
	}
}
