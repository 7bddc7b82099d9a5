package pgwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Reader is what a replication connection is read through: pgconn's
// frontend while connecting, the Conn's FrameReader once the connection is
// hijacked. Once a Conn owns it, a read that follows a small one (less
// than smallRead: the stream is keeping up with the walsender) first waits
// until smallRead bytes are queued or the read wait has passed, so that
// several messages arrive in one read: fewer wake-ups and system calls,
// for at most the wait of added latency. An idle stream is not delayed
// further: the wait comes before a read that would block anyway.
//
// On Linux, over TCP, the wait is a wait on the socket (waitQueued) with
// its receive low-water mark raised to smallRead, so the messages that
// arrive during the wait do not wake the Go network poller one by one.
// Elsewhere it is a sleep.
//
// On Linux over plain TCP (no TLS), the read after a wait on the socket
// uses rawRead: a read(2) the Go scheduler is not told about, which is
// safe because it never blocks (the socket is non-blocking; waits go
// through the network poller), and which spares the scheduler's monitor
// thread wake-ups and P hand-offs each time the stream returns from idle.
// (In -race builds it is a read through package syscall, so that the race
// detector sees what it writes into the receive buffers.)
// A read that follows no wait (the stream is behind) goes through
// net.Conn, so the scheduler can hand the P to other goroutines (the
// producer's) while the stream works flat out.
// The measurements behind this are in docs/benchmarks.md, Profile
// findings.
//
// A Reader also keeps the read deadline the Conn asked for (setDeadline):
// a wait ends at that deadline too, and puts it back when it used its own.
type Reader struct {
	r    io.Reader       // what it reads: conn, or TLS over it
	wait time.Duration   // the longest wait; 0: never wait
	ctx  context.Context // the session's: a wait ends when it is done
	conn net.Conn        // the connection, for read deadlines; set by own
	sock syscall.RawConn // the dialed TCP socket under it, watched by a wait; nil if none

	raw      bool      // read sock with rawRead after a wait (set by own)
	deadline time.Time // the Conn's read deadline; zero: none
	small    bool      // the last read returned less than smallRead
	waits    int       // waits so far (for tests)
	wakes    int       // poller wake-ups during socket waits (for tests)
	rawReads int       // reads with rawRead (for tests)
}

// smallRead is what counts as a read that got little, and what a wait
// waits for.
const smallRead = 64 << 10

// NewReader returns a Reader of r, which reads dialed (the socket pgconn
// dialed) directly or through TLS. wait is the longest a read waits for a
// batch after a small one (0: never). A wait ends when ctx is done. Use it
// in pgconn.Config.BuildFrontend, and pass it to Hijack.
func NewReader(ctx context.Context, r io.Reader, dialed net.Conn, wait time.Duration) *Reader {
	c := &Reader{r: r, wait: wait, ctx: ctx}
	if tcp, ok := dialed.(*net.TCPConn); ok && lowatWaits {
		c.sock, _ = tcp.SyscallConn()
	}
	return c
}

// Read reads into p, after a wait for a batch when the last read was small
// and a Conn owns the connection.
func (c *Reader) Read(p []byte) (int, error) {
	// pgconn's own reads, while connecting, are never delayed.
	waited := false
	if c.small && c.wait > 0 && c.conn != nil {
		var err error
		if waited, err = c.gather(); err != nil {
			return 0, err
		}
	}
	var n int
	var err error
	if c.raw && waited {
		c.rawReads++
		n, err = rawRead(c.sock, p)
	} else {
		n, err = c.r.Read(p)
	}
	c.small = n < smallRead
	return n, err
}

// own tells the reader that a Conn owns conn, the connection it is under,
// from now on: waits begin, and without TLS (the reader then reads the
// dialed socket itself) the read after a wait is raw.
func (c *Reader) own(conn net.Conn) {
	c.conn = conn
	_, tlsConn := conn.(*tls.Conn)
	c.raw = c.sock != nil && !tlsConn
}

// setDeadline sets the read deadline of the Conn's reads (zero: none).
// A Conn owns the connection (own).
func (c *Reader) setDeadline(t time.Time) error {
	c.deadline = t
	return c.conn.SetReadDeadline(t)
}

// gather waits until smallRead bytes are queued, wait has passed, the
// Conn's deadline has passed or ctx is done, whichever comes first. It
// reports whether it waited on the socket (with fewer than smallRead bytes
// queued).
func (c *Reader) gather() (waited bool, err error) {
	c.waits++
	if c.sock == nil {
		time.Sleep(c.wait)
		return false, nil
	}
	end := time.Now().Add(c.wait)
	if !c.deadline.IsZero() && c.deadline.Before(end) {
		end = c.deadline
	}
	if err := c.conn.SetReadDeadline(end); err != nil {
		return false, err
	}
	waited, err = waitQueued(c.sock, smallRead, &c.wakes)
	if derr := c.conn.SetReadDeadline(c.deadline); derr != nil {
		return waited, derr
	}
	// Done while waiting: the context's wake-up (a deadline of now) may
	// have been replaced just above; the read after this one must not
	// block.
	if c.ctx.Err() != nil {
		return waited, fmt.Errorf("waiting for replication data: %w", c.ctx.Err())
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return waited, fmt.Errorf("waiting for replication data: %w", err)
	}
	return waited, nil
}
