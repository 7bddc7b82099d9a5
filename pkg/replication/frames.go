package replication

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
)

// Buffer is one piece of the stream's receive buffer. The bytes of each
// message a Handler is given lie in one Buffer. A Handler that keeps them
// past the call (an outbox row's payload, in flight to Kafka) holds the
// buffer during the call and releases it, from any goroutine, once it no
// longer uses them: the stream reuses a buffer only after every holder has
// released it. Keeping the bytes where the walsender's data landed spares
// copying each row again.
type Buffer struct {
	b    []byte
	refs atomic.Int32  // holders; the frame reader is one while it reads into b
	live *atomic.Int32 // the reader's count of buffers not yet released
	free chan *Buffer  // where a released standard-size buffer goes; nil: none
}

// NewBuffer returns a Buffer outside any stream, held once by the caller
// (who releases it like any holder), for testing how a Handler holds and
// releases the buffers it is given. No bound applies to its holds.
func NewBuffer() *Buffer {
	b := &Buffer{live: new(atomic.Int32)}
	b.refs.Store(1)
	b.live.Store(1)
	return b
}

// maxLiveBuffers bounds the buffers a stream keeps: the one it reads into
// and those handlers hold (4 MiB in all, in standard sizes).
const maxLiveBuffers = 8

// Hold keeps the buffer's bytes until a matching Release and reports true;
// or, when maxLiveBuffers are kept already, it holds nothing and reports
// false, and the handler copies what it keeps. The bound matters when a
// few records stay in flight for long (a partition without a leader) while
// the rest are acknowledged: each of the few would otherwise keep a whole
// buffer, and the reader go on filling new ones. Call Hold only during the
// Handler call that was given the buffer.
func (b *Buffer) Hold() bool {
	if b.live.Load() >= maxLiveBuffers && !b.held() {
		return false
	}
	b.refs.Add(1)
	return true
}

// Release ends one Hold. It may be called from any goroutine.
func (b *Buffer) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		b.live.Add(-1)
		if b.free != nil {
			b.free <- b // never blocks: it holds every standard buffer the reader made
		}
	case n < 0:
		panic("replication: Buffer released more often than held")
	}
}

// held reports whether anyone but the frame reader holds the buffer. Only
// the reader, on the stream's goroutine, calls it: holders are added only
// on that goroutine, so a false answer stays false until the next Hold.
func (b *Buffer) held() bool { return b.refs.Load() > 1 }

// Receive buffer sizes. A read is always given at least minReadSpace bytes
// of room: coalescingReader counts a read that got less than smallRead as
// small and waits before the next one, so a read that takes all it is
// given must be able to take more than that.
const (
	bufferSize   = 512 << 10
	minReadSpace = 128 << 10
)

// frameReader reads the backend messages of a replication connection
// (type byte, int32 length, body) from r into Buffers. Only the stream's
// goroutine uses it. A body is valid until the next call to next, unless
// its Buffer is held.
//
// It replaces pgproto3's frontend for the replication stream, which copied
// each message out of its own read buffer before the stream decoded it.
type frameReader struct {
	r io.Reader
	// free holds the standard-size buffers released by all their holders.
	// It is not a sync.Pool, which every garbage collection empties: the
	// buffers would be allocated again, 512 KiB at a time, and the
	// collections come sooner.
	free   chan *Buffer
	made   int          // standard-size buffers made
	live   atomic.Int32 // buffers handed out and not yet released
	cur    *Buffer      // the buffer being read into
	rp, wp int          // unread bytes are cur.b[rp:wp]
	// large, when set, is called with a buffer's size before one larger
	// than the standard size is allocated (Config.LargeMessage).
	large func(n int)
}

// maxStandardBuffers bounds the standard-size buffers a reader makes:
// maxLiveBuffers, and one the reader needs when that many are held.
const maxStandardBuffers = maxLiveBuffers + 1

func newFrameReader(r io.Reader) *frameReader {
	f := &frameReader{r: r, free: make(chan *Buffer, maxStandardBuffers)}
	f.cur = f.get(bufferSize)
	return f
}

// get returns a buffer of at least n bytes, held by the reader: a
// released standard one, a new one while fewer than maxStandardBuffers
// were made, or else one left to the garbage collector once released.
func (f *frameReader) get(n int) *Buffer {
	var b *Buffer
	if n <= bufferSize {
		select {
		case b = <-f.free:
		default:
			if f.made < maxStandardBuffers {
				f.made++
				b = &Buffer{b: make([]byte, bufferSize), live: &f.live, free: f.free}
			}
		}
	}
	if b == nil {
		if n > bufferSize && f.large != nil {
			f.large(n)
		}
		b = &Buffer{b: make([]byte, max(n, bufferSize)), live: &f.live}
	}
	b.refs.Store(1)
	f.live.Add(1)
	return b
}

// next returns the next message's type and body, and the Buffer the body
// is in. A read error is returned as is; the bytes read before it are
// kept, so after a deadline the next call goes on where this one stopped.
func (f *frameReader) next() (typ byte, body []byte, buf *Buffer, err error) {
	for {
		if f.wp-f.rp >= 5 {
			n := binary.BigEndian.Uint32(f.cur.b[f.rp+1:])
			if n < 4 || n > maxMessageLen {
				return 0, nil, nil, fmt.Errorf("invalid message length %d (type %q)", n, f.cur.b[f.rp])
			}
			end := f.rp + 1 + int(n)
			if end <= f.wp {
				typ, body = f.cur.b[f.rp], f.cur.b[f.rp+5:end:end]
				f.rp = end
				return typ, body, f.cur, nil
			}
			f.makeRoom(1 + int(n))
		} else {
			f.makeRoom(5)
		}
		n, err := f.r.Read(f.cur.b[f.wp:])
		f.wp += n
		if err != nil {
			return 0, nil, nil, err
		}
	}
}

// buffered reports whether a whole message is buffered: whether the next
// call to next returns without reading.
func (f *frameReader) buffered() bool {
	if f.wp-f.rp < 5 {
		return false
	}
	n := binary.BigEndian.Uint32(f.cur.b[f.rp+1:])
	return uint64(f.rp)+1+uint64(n) <= uint64(f.wp)
}

// maxMessageLen bounds a message's length field (its body and the field
// itself) as pgproto3 did: a body of at most 1 GiB - 2 bytes. Postgres
// builds no message larger than its largest allocation, 1 GiB - 1.
const maxMessageLen = 0x3fffffff - 1 + 4

// makeRoom makes sure the current buffer can take the rest of a message of
// need bytes starting at rp, and gives the next read at least minReadSpace
// bytes (or all the message still lacks, if more). Unread bytes move to
// the start of the buffer when no handler holds it (and it is of the
// standard size), or else to a new one.
func (f *frameReader) makeRoom(need int) {
	if f.rp == f.wp && !f.cur.held() {
		f.rp, f.wp = 0, 0 // all read and let go: start over, where the cache is warm
	}
	space := max(minReadSpace, need-(f.wp-f.rp))
	if len(f.cur.b)-f.wp >= space {
		return
	}
	size := max(bufferSize, need+minReadSpace)
	if !f.cur.held() && f.cur.free != nil && size == bufferSize {
		f.wp = copy(f.cur.b, f.cur.b[f.rp:f.wp])
		f.rp = 0
		return
	}
	next := f.get(size)
	f.wp = copy(next.b, f.cur.b[f.rp:f.wp])
	f.rp = 0
	f.cur.Release()
	f.cur = next
}

// close releases the reader's buffer.
func (f *frameReader) close() {
	f.cur.Release()
	f.cur = nil
}
