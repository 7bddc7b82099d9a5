package pgwire

import "sync/atomic"

// Buffer is one receive buffer. The bytes of each message Receive returns
// lie in one Buffer. A caller that keeps them past the next Receive (an
// outbox row's payload, in flight to Kafka) holds the buffer before then
// and releases it, from any goroutine, once it no longer uses them: the
// reader reads into a buffer again only after every holder has released
// it. So a row's bytes stay where the socket read put them, and are not
// copied again.
type Buffer struct {
	b    []byte
	refs atomic.Int32  // holders; the frame reader is one while it reads into b
	live *atomic.Int32 // the reader's count of buffers not yet released
	free chan *Buffer  // where a released standard-size buffer goes; nil: none
}

// NewBuffer returns a Buffer outside any reader, held once by the caller
// (who releases it like any holder), for testing how code holds and
// releases the buffers it is given. No bound applies to its holds.
func NewBuffer() *Buffer {
	b := &Buffer{live: new(atomic.Int32)}
	b.refs.Store(1)
	b.live.Store(1)
	return b
}

// MaxLiveBuffers bounds the buffers a reader keeps: the one it reads into
// and those callers hold (4 MiB in all, in standard sizes).
const MaxLiveBuffers = 8

// Hold keeps the buffer's bytes until a matching Release and reports true;
// or, when MaxLiveBuffers are kept already, it holds nothing and reports
// false, and the caller copies what it keeps. The bound matters when a
// few records stay in flight for long (a partition without a leader)
// while the rest are acknowledged: each of the few would otherwise keep a
// whole buffer, and the reader go on filling new ones. Call Hold only
// before the next Receive (or FrameReader.Next), on the reader's
// goroutine.
func (b *Buffer) Hold() bool {
	if b.live.Load() >= MaxLiveBuffers && !b.held() {
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
		panic("pgwire: Buffer released more often than held")
	}
}

// held reports whether anyone but the frame reader holds the buffer. Only
// the reader's goroutine calls it: holders are added only on that
// goroutine, so a false answer stays false until the next Hold.
func (b *Buffer) held() bool { return b.refs.Load() > 1 }
