package pgwire

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Conn is a replication connection taken over from pgconn (Hijack) once
// connected and idle: it sends START_REPLICATION and status updates itself
// and reads the copy-both stream through a FrameReader, with socket read
// deadlines instead of pgconn's per-message context watching. Only one
// goroutine uses it.
type Conn struct {
	conn   net.Conn
	frames *FrameReader
	in     *Reader     // under frames; keeps the read deadline
	stop   func() bool // unregisters the context's wake-up
	status [1 + 5 + 34]byte
}

// Backend message types a replication stream receives.
const (
	MsgCopyData         = 'd'
	MsgCopyDone         = 'c'
	MsgCopyBothResponse = 'W'
	MsgErrorResponse    = 'E'
	MsgNoticeResponse   = 'N'
)

// Hijack takes over conn, which must be idle and read through in. When
// ctx is done, a blocked Receive returns at once. large is passed to
// NewFrameReader. The PgConn must not be used afterwards; Close closes
// the socket.
func Hijack(ctx context.Context, conn *pgconn.PgConn, in *Reader, large func(n int)) (*Conn, error) {
	hj, err := conn.Hijack()
	if err != nil {
		return nil, err
	}
	if n := hj.Frontend.ReadBufferLen(); n != 0 {
		_ = hj.Conn.Close()
		return nil, fmt.Errorf("%d unread bytes from the server on an idle connection", n)
	}
	in.own(hj.Conn)
	c := &Conn{conn: hj.Conn, frames: NewFrameReader(in, large), in: in}
	c.stop = context.AfterFunc(ctx, func() { _ = hj.Conn.SetReadDeadline(time.Now()) })
	return c, nil
}

// StartReplication sends a START_REPLICATION command (sql) and waits for
// the server to enter copy-both mode. A refusal is returned as a
// *pgconn.PgError.
func (c *Conn) StartReplication(ctx context.Context, sql string) error {
	q, err := (&pgproto3.Query{String: sql}).Encode(nil)
	if err != nil {
		return err
	}
	if err := c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	if _, err := c.conn.Write(q); err != nil {
		return fmt.Errorf("sending START_REPLICATION: %w", err)
	}
	for {
		typ, body, _, err := c.Receive(ctx, time.Time{})
		if err != nil {
			return fmt.Errorf("waiting for START_REPLICATION's answer: %w", err)
		}
		switch typ {
		case MsgCopyBothResponse:
			return nil
		case MsgErrorResponse:
			return ServerError(body)
		case MsgNoticeResponse:
		default:
			return fmt.Errorf("unexpected message %q in answer to START_REPLICATION", typ)
		}
	}
}

// ServerError decodes an ErrorResponse body into a *pgconn.PgError.
func ServerError(body []byte) error {
	var e pgproto3.ErrorResponse
	if err := e.Decode(body); err != nil {
		return fmt.Errorf("decoding the server's error: %w", err)
	}
	return pgconn.ErrorResponseToPgError(&e)
}

// Receive returns the next message's type and body and the Buffer it is
// in, or an error wrapping os.ErrDeadlineExceeded once deadline (zero:
// none) passes or ctx is done. The body is valid until the next Receive,
// unless the Buffer is held.
func (c *Conn) Receive(ctx context.Context, deadline time.Time) (byte, []byte, *Buffer, error) {
	if !deadline.Equal(c.in.deadline) {
		if err := c.in.setDeadline(deadline); err != nil {
			return 0, nil, nil, err
		}
		// The wake-up may have fired before this deadline replaced its
		// own; it only fires once ctx is done, so this check covers it.
		if ctx.Err() != nil {
			return 0, nil, nil, fmt.Errorf("receiving: %w", ctx.Err())
		}
	}
	return c.frames.Next()
}

// Buffered reports whether a whole message is buffered: whether the next
// Receive returns without reading the socket.
func (c *Conn) Buffered() bool { return c.frames.Buffered() }

// SendStatus writes a Standby Status Update with the three positions as
// given: no position is ever filled in from another.
func (c *Conn) SendStatus(write, flush, apply pglogrepl.LSN) error {
	b := c.status[:0]
	b = append(b, 'd', 0, 0, 0, 0) // CopyData, length filled below
	b = append(b, pglogrepl.StandbyStatusUpdateByteID)
	b = binary.BigEndian.AppendUint64(b, uint64(write))
	b = binary.BigEndian.AppendUint64(b, uint64(flush))
	b = binary.BigEndian.AppendUint64(b, uint64(apply))
	b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixMicro()-pgEpochMicros))
	b = append(b, 0) // no reply requested
	binary.BigEndian.PutUint32(b[1:], uint32(len(b)-1))
	if err := c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	_, err := c.conn.Write(b)
	return err
}

// Close ends the session politely (Terminate), closes the socket and
// lets go of the current receive buffer (callers may still hold it).
func (c *Conn) Close() {
	c.stop()
	_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.conn.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
	_ = c.conn.Close()
	c.frames.Close()
}

// pgEpochMicros is Postgres's time zero (2000-01-01 UTC) in Unix
// microseconds, for the timestamp in status updates.
const pgEpochMicros = 946684800 * 1000000
