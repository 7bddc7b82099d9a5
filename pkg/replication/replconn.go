package replication

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// replConn is a replication connection, taken over from pgconn (Hijack)
// once connected and idle: it starts replication itself and reads the
// copy-both stream through a frameReader, so message bytes stay in the
// buffer they were read into. A receive waits at most until a deadline
// (the next status update) or until the context is done. Only the
// stream's goroutine uses it.
type replConn struct {
	conn   net.Conn
	frames *frameReader
	in     *coalescingReader // under frames; keeps the read deadline
	stop   func() bool       // unregisters the context's wake-up
	status [1 + 5 + 34]byte
}

// newReplConn takes over conn, which must be idle and read through in.
// When ctx is done, a blocked receive returns at once.
func newReplConn(ctx context.Context, conn *pgconn.PgConn, in *coalescingReader) (*replConn, error) {
	hj, err := conn.Hijack()
	if err != nil {
		return nil, err
	}
	if n := hj.Frontend.ReadBufferLen(); n != 0 {
		_ = hj.Conn.Close()
		return nil, fmt.Errorf("%d unread bytes from the server on an idle connection", n)
	}
	in.own(hj.Conn)
	w := &replConn{conn: hj.Conn, frames: newFrameReader(in), in: in}
	w.stop = context.AfterFunc(ctx, func() { _ = hj.Conn.SetReadDeadline(time.Now()) })
	return w, nil
}

// Backend message types the stream handles.
const (
	msgCopyData         = 'd'
	msgCopyDone         = 'c'
	msgCopyBothResponse = 'W'
	msgErrorResponse    = 'E'
	msgNoticeResponse   = 'N'
)

// startReplication sends START_REPLICATION (sql) and waits for the server
// to enter copy-both mode. A refusal is returned as a *pgconn.PgError.
func (w *replConn) startReplication(ctx context.Context, sql string) error {
	q, err := (&pgproto3.Query{String: sql}).Encode(nil)
	if err != nil {
		return err
	}
	if err := w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	if _, err := w.conn.Write(q); err != nil {
		return fmt.Errorf("sending START_REPLICATION: %w", err)
	}
	for {
		typ, body, _, err := w.receive(ctx, time.Time{})
		if err != nil {
			return fmt.Errorf("waiting for START_REPLICATION's answer: %w", err)
		}
		switch typ {
		case msgCopyBothResponse:
			return nil
		case msgErrorResponse:
			return serverError(body)
		case msgNoticeResponse:
		default:
			return fmt.Errorf("unexpected message %q in answer to START_REPLICATION", typ)
		}
	}
}

// serverError decodes an ErrorResponse body.
func serverError(body []byte) error {
	var e pgproto3.ErrorResponse
	if err := e.Decode(body); err != nil {
		return fmt.Errorf("decoding the server's error: %w", err)
	}
	return pgconn.ErrorResponseToPgError(&e)
}

// receive returns the next message's type and body and the Buffer it is
// in, or an error wrapping os.ErrDeadlineExceeded once deadline passes or
// ctx is done. The body is valid until the next receive, unless the
// Buffer is held.
func (w *replConn) receive(ctx context.Context, deadline time.Time) (byte, []byte, *Buffer, error) {
	if !deadline.Equal(w.in.deadline) {
		if err := w.in.setDeadline(deadline); err != nil {
			return 0, nil, nil, err
		}
		// The wake-up may have fired before this deadline replaced its
		// own; it only fires once ctx is done, so this check covers it.
		if ctx.Err() != nil {
			return 0, nil, nil, fmt.Errorf("receiving: %w", ctx.Err())
		}
	}
	return w.frames.next()
}

// sendStatus writes a Standby Status Update with the three positions as
// given: no position is ever filled in from another.
func (w *replConn) sendStatus(write, flush, apply pglogrepl.LSN) error {
	b := w.status[:0]
	b = append(b, 'd', 0, 0, 0, 0) // CopyData, length filled below
	b = append(b, pglogrepl.StandbyStatusUpdateByteID)
	b = binary.BigEndian.AppendUint64(b, uint64(write))
	b = binary.BigEndian.AppendUint64(b, uint64(flush))
	b = binary.BigEndian.AppendUint64(b, uint64(apply))
	b = binary.BigEndian.AppendUint64(b, uint64(time.Since(pgEpoch).Microseconds()))
	b = append(b, 0) // no reply requested
	binary.BigEndian.PutUint32(b[1:], uint32(len(b)-1))
	if err := w.conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	_, err := w.conn.Write(b)
	return err
}

// close ends the session politely (Terminate), closes the socket and
// lets go of the read buffer (handlers may still hold parts of it).
func (w *replConn) close() {
	w.stop()
	_ = w.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = w.conn.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
	_ = w.conn.Close()
	w.frames.close()
}

// pgEpoch is Postgres's time zero, for the timestamp in status updates.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// coalescingReader sits under the stream's frame reader. When a read
// returned little (the stream is keeping up with the walsender, one
// message per read), it waits before the next read until smallRead bytes
// are queued on the socket or wait has passed, so that several messages
// arrive in one read: far fewer wake-ups and system calls for at most wait
// of added latency. An idle stream is not delayed further: the wait comes
// before a read that would block anyway.
//
// On Linux, over TCP, the wait is a wait for the socket itself (see
// waitQueued), with the socket's receive low-water mark raised to
// smallRead: the walsender's messages do not wake the Go network poller
// one by one (a wake-up costs walrelay a thread switch and the walsender,
// who pays for waking its reader, even more), and the wait ends as soon as
// smallRead bytes are there. Elsewhere it sleeps for wait.
//
// On Linux, once the stream owns a plain TCP connection, the wait's socket
// calls, and the read after a wait, are raw system calls that the Go
// scheduler does not see (rawRead). They never block: the socket is
// non-blocking and waits go through the network poller. A call the
// scheduler sees is not free with one P (relay.max_procs): the first after
// an idle spell wakes the runtime's monitor thread, which then polls every
// 20µs while the stream works, and a call it sees lasting 20µs (a 64 KiB
// read can) makes it hand the P to another thread. In a drain walrelay
// goes idle about a thousand times a second, waiting for the walsender.
//
// A read that follows no wait (the stream is behind: the last read got a
// full batch) goes through net.Conn. There that hand-off is what lets
// franz-go's goroutines run and the network (the broker's
// acknowledgements) be polled while the stream works flat out: with raw
// reads they waited for the stream's 10ms preemption or for the in-flight
// cap to stop it, and commit-to-ack p99 rose to hundreds of ms at 10k
// single-row transactions/s.
//
// It also keeps the read deadline the stream asked for (setDeadline): the
// wait ends at that deadline too, and puts it back when it used its own.
type coalescingReader struct {
	r    io.Reader       // what it reads: conn, or TLS over it
	wait time.Duration   // the longest wait; 0: never wait
	ctx  context.Context // the session's: a wait ends when it is done
	conn net.Conn        // the connection, for read deadlines; set by own
	sock syscall.RawConn // the dialed TCP socket under it, watched by a wait; nil if none

	raw      bool      // read sock with rawRead after a wait (set by own)
	deadline time.Time // the stream's read deadline; zero: none
	small    bool      // the last read returned less than smallRead
	waits    int       // waits so far (for tests)
	wakes    int       // poller wake-ups during socket waits (for tests)
	rawReads int       // reads with rawRead (for tests)
}

// smallRead is what counts as a read that got little, and what a wait
// waits for.
const smallRead = 64 << 10

// newCoalescingReader returns a reader of r, which reads the dialed
// socket (directly, or through TLS).
func newCoalescingReader(ctx context.Context, r io.Reader, dialed net.Conn, wait time.Duration) *coalescingReader {
	c := &coalescingReader{r: r, wait: wait, ctx: ctx}
	if tcp, ok := dialed.(*net.TCPConn); ok && lowatWaits {
		c.sock, _ = tcp.SyscallConn()
	}
	return c
}

func (c *coalescingReader) Read(p []byte) (int, error) {
	// Waits begin once the stream owns the connection (own): pgconn's
	// own reads, while connecting, are never delayed.
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

// own tells the reader that the stream owns conn, the connection it is
// under, from now on: waits begin, and without TLS (the reader then
// reads the dialed socket itself) the read after a wait is raw.
func (c *coalescingReader) own(conn net.Conn) {
	c.conn = conn
	_, tlsConn := conn.(*tls.Conn)
	c.raw = c.sock != nil && !tlsConn
}

// setDeadline sets the read deadline of the stream's reads (zero: none).
// The stream owns the connection (own).
func (c *coalescingReader) setDeadline(t time.Time) error {
	c.deadline = t
	return c.conn.SetReadDeadline(t)
}

// gather waits until smallRead bytes are queued, wait has passed, the
// stream's deadline has passed or ctx is done, whichever comes first. It
// reports whether it waited on the socket (with fewer than smallRead bytes
// queued).
func (c *coalescingReader) gather() (waited bool, err error) {
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
