package pgwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
)

// Receive buffer sizes. A read is always given at least minReadSpace bytes
// of room: Reader counts a read that got less than smallRead as small and
// waits before the next one, so a read that takes all it is given must be
// able to take more than that.
const (
	bufferSize   = 512 << 10
	minReadSpace = 128 << 10
)

// maxMessageLen bounds a message's length field (its body and the field
// itself): a body of at most 1 GiB - 2 bytes, as pgproto3 allows. Postgres
// builds no message larger than its largest allocation, 1 GiB - 1.
const maxMessageLen = 0x3fffffff - 1 + 4

// maxStandardBuffers bounds the standard-size buffers a reader makes:
// MaxLiveBuffers, and one the reader needs when that many are held.
const maxStandardBuffers = MaxLiveBuffers + 1

// FrameReader reads backend messages (type byte, int32 length, body) from
// an io.Reader straight into Buffers, so that a message's bytes stay where
// the read put them. Only one goroutine uses it. A body is valid until
// the next call to Next, unless its Buffer is held.
type FrameReader struct {
	r io.Reader
	// free holds the standard-size buffers released by all their holders.
	// It is not a sync.Pool, which every garbage collection empties: the
	// buffers would be allocated again, 512 KiB at a time.
	free   chan *Buffer
	made   int          // standard-size buffers made
	live   atomic.Int32 // buffers handed out and not yet released
	cur    *Buffer      // the buffer being read into
	rp, wp int          // unread bytes are cur.b[rp:wp]
	large  func(n int)  // see NewFrameReader
}

// NewFrameReader returns a FrameReader of r. large, when not nil, is
// called with a buffer's size before a buffer larger than the standard
// 512 KiB is allocated for a message that does not fit one.
func NewFrameReader(r io.Reader, large func(n int)) *FrameReader {
	f := &FrameReader{r: r, free: make(chan *Buffer, maxStandardBuffers), large: large}
	f.cur = f.get(bufferSize)
	return f
}

// get returns a buffer of at least n bytes, held by the reader: a
// released standard one, a new one while fewer than maxStandardBuffers
// were made, or else one left to the garbage collector once released.
func (f *FrameReader) get(n int) *Buffer {
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

// Next returns the next message's type and body, and the Buffer the body
// is in. A read error is returned as is; the bytes read before it are
// kept, so after a deadline the next call goes on where this one stopped.
func (f *FrameReader) Next() (typ byte, body []byte, buf *Buffer, err error) {
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

// Buffered reports whether a whole message is buffered: whether the next
// call to Next returns without reading.
func (f *FrameReader) Buffered() bool {
	if f.wp-f.rp < 5 {
		return false
	}
	n := binary.BigEndian.Uint32(f.cur.b[f.rp+1:])
	return uint64(f.rp)+1+uint64(n) <= uint64(f.wp)
}

// makeRoom makes sure the current buffer can take the rest of a message of
// need bytes starting at rp, and gives the next read at least minReadSpace
// bytes (or all the message still lacks, if more). Unread bytes move to
// the start of the buffer when no one else holds it (and it is of the
// standard size), or else to a new one.
func (f *FrameReader) makeRoom(need int) {
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

// Close releases the reader's own hold on its current buffer; callers may
// still hold it and the others.
func (f *FrameReader) Close() {
	f.cur.Release()
	f.cur = nil
}
