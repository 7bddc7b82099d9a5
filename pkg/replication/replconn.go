package replication

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// replConn is a replication connection in copy-both mode, taken over from
// pgconn (Hijack). Reads go through the connection's pgproto3 frontend,
// which reuses its message structs and reads ahead into its buffer; a
// receive waits at most until a deadline (the next status update) or
// until the context is done. Only the stream's goroutine uses it.
type replConn struct {
	conn     net.Conn
	fe       *pgproto3.Frontend
	deadline time.Time
	stop     func() bool // unregisters the context's wake-up
	status   [1 + 5 + 34]byte
}

// newWire takes over conn, which must be in copy-both mode (after
// START_REPLICATION). When ctx is done, a blocked receive returns at once.
func newReplConn(ctx context.Context, conn *pgconn.PgConn) (*replConn, error) {
	hj, err := conn.Hijack()
	if err != nil {
		return nil, err
	}
	w := &replConn{conn: hj.Conn, fe: hj.Frontend}
	w.stop = context.AfterFunc(ctx, func() { _ = hj.Conn.SetReadDeadline(time.Now()) })
	return w, nil
}

// receive returns the next message, or an error wrapping
// os.ErrDeadlineExceeded once deadline passes or ctx is done. The message
// is valid until the next receive.
func (w *replConn) receive(ctx context.Context, deadline time.Time) (pgproto3.BackendMessage, error) {
	if !deadline.Equal(w.deadline) {
		if err := w.conn.SetReadDeadline(deadline); err != nil {
			return nil, err
		}
		w.deadline = deadline
		// The wake-up may have fired before this deadline replaced its
		// own; it only fires once ctx is done, so this check covers it.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("receiving: %w", ctx.Err())
		}
	}
	return w.fe.Receive()
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

// close ends the session politely (Terminate) and closes the socket.
func (w *replConn) close() {
	w.stop()
	_ = w.conn.SetWriteDeadline(time.Now().Add(time.Second))
	w.fe.Send(&pgproto3.Terminate{})
	_ = w.fe.Flush()
	_ = w.conn.Close()
}

// pgEpoch is Postgres's time zero, for the timestamp in status updates.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// coalescingReader sits under the connection's read buffer. When a read
// returned little (the stream is keeping up with the walsender, one
// message per read), it waits before the next read so that several
// messages arrive in one: far fewer wake-ups and system calls for at most
// wait of added latency. An idle stream is not delayed further: the wait
// comes before a read that would block anyway.
//
// During the wait the socket's receive low-water mark is raised to
// smallRead (on Linux, when the socket is known): otherwise every message
// the walsender sends in the meantime would wake the Go network poller
// for nothing, a wake-up that costs walrelay a thread switch and the
// walsender, who pays for waking its reader, even more. The mark is back
// at one byte before any read, so a read that blocks wakes on the first
// byte as usual and no message waits for company.
type coalescingReader struct {
	r     io.Reader
	wait  time.Duration
	sock  syscall.RawConn // the TCP socket, nil if unknown
	small bool            // the last read returned less than smallRead
}

// smallRead is what counts as a read that got little.
const smallRead = 16 << 10

func (c *coalescingReader) Read(p []byte) (int, error) {
	if c.small && c.wait > 0 {
		lowat := c.sock != nil && setRcvLowat(c.sock, smallRead) == nil
		time.Sleep(c.wait)
		if lowat {
			if err := setRcvLowat(c.sock, 1); err != nil {
				return 0, fmt.Errorf("resetting SO_RCVLOWAT: %w", err)
			}
		}
	}
	n, err := c.r.Read(p)
	c.small = n < smallRead
	return n, err
}
