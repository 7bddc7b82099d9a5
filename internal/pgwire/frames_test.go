package pgwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
)

// frame encodes one backend message.
func frame(typ byte, body []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// trickle serves its bytes at most step bytes per Read, recording the room
// each Read was given, and returns err once they run out.
type trickle struct {
	data  []byte
	step  int
	err   error
	rooms []int
}

func (t *trickle) Read(p []byte) (int, error) {
	t.rooms = append(t.rooms, len(p))
	if len(t.data) == 0 {
		return 0, t.err
	}
	n := copy(p[:min(len(p), t.step)], t.data)
	t.data = t.data[n:]
	return n, nil
}

// body returns n bytes of a pattern that differs by seed.
func body(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*7 + i)
	}
	return b
}

// Messages come out whole and in order however the bytes are split across
// reads, including messages larger than a buffer, and every read is given
// at least minReadSpace bytes of room.
func TestFrameReaderSplitsMessages(t *testing.T) {
	sizes := []int{0, 1, 300, bufferSize - 5, 3 * bufferSize, 17, minReadSpace + 1, 450}
	var stream []byte
	for i, n := range sizes {
		stream = append(stream, frame('d', body(i, n))...)
	}
	for _, step := range []int{1, 7, 4096, 1 << 20} {
		src := &trickle{data: bytes.Clone(stream), step: step, err: io.EOF}
		f := NewFrameReader(src, nil)
		for i, n := range sizes {
			typ, got, buf, err := f.Next()
			if err != nil {
				t.Fatalf("step %d, message %d: %v", step, i, err)
			}
			if typ != 'd' || !bytes.Equal(got, body(i, n)) || buf == nil {
				t.Fatalf("step %d, message %d: type %q, %d bytes (want %d), buffer %p", step, i, typ, len(got), n, buf)
			}
		}
		if _, _, _, err := f.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("step %d: after the last message: %v, want io.EOF", step, err)
		}
		for _, room := range src.rooms {
			if room < minReadSpace {
				t.Fatalf("step %d: a read was given %d bytes of room, want at least %d", step, room, minReadSpace)
			}
		}
	}
}

// A held buffer's bytes stay as they were while the reader reads on into
// other buffers, and a buffer goes back to the reader's pool only once
// every holder has released it.
func TestFrameReaderKeepsHeldBytes(t *testing.T) {
	const n = 4000 // messages of 1000 bytes: several buffers' worth
	var stream []byte
	for i := range n {
		stream = append(stream, frame('d', body(i, 1000))...)
	}
	f := NewFrameReader(&trickle{data: stream, step: 64 << 10, err: io.EOF}, nil)
	type kept struct {
		b   []byte
		buf *Buffer
	}
	var held []kept
	bufs := map[*Buffer]bool{}
	for i := range n {
		_, b, buf, err := f.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if i%2 == 0 && buf.Hold() { // every other one, as in-flight records do
			held = append(held, kept{b, buf})
		}
		bufs[buf] = true
	}
	if len(bufs) < 4 {
		t.Fatalf("read %d messages into %d buffers; want several (the test needs the reader to move on)", n, len(bufs))
	}
	for j, k := range held {
		if !bytes.Equal(k.b, body(2*j, 1000)) {
			t.Fatalf("held message %d changed while the reader read on", 2*j)
		}
	}
	if len(held) == n/2 {
		t.Fatalf("held all %d messages; want Hold to refuse once %d buffers are kept", len(held), MaxLiveBuffers)
	}
	// Released, a buffer the reader has left is reused for new reads; the
	// one it reads into is not released by its holders alone.
	first := held[0].buf
	for _, k := range held {
		k.buf.Release()
	}
	if first == f.cur {
		t.Fatal("the test needs the first buffer to be one the reader has left")
	}
	if got := first.refs.Load(); got != 0 {
		t.Fatalf("a left buffer has %d holders after every release, want 0", got)
	}
	if got := f.cur.refs.Load(); got != 1 {
		t.Fatalf("the current buffer has %d holders, want 1 (the reader)", got)
	}
	if got := f.live.Load(); got != 1 {
		t.Fatalf("%d buffers live after every release, want 1 (the reader's)", got)
	}
}

// Holders keep at most MaxLiveBuffers buffers: once that many are live, a
// Hold that would keep one more refuses, and the reader reads on in the
// buffer it has. Released buffers are read into again, not made anew.
func TestFrameReaderBoundsHeldBuffers(t *testing.T) {
	const n = 20000 // 20 MB of 1000-byte messages per pass: far more than the bound
	var stream []byte
	for i := range 2 * n {
		stream = append(stream, frame('d', body(i, 1000))...)
	}
	f := NewFrameReader(&trickle{data: stream, step: 64 << 10, err: io.EOF}, nil)
	made := 0
	for pass := range 2 {
		var held []*Buffer
		refused := 0
		for i := pass * n; i < (pass+1)*n; i++ {
			_, b, buf, err := f.Next()
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if !bytes.Equal(b, body(i, 1000)) {
				t.Fatalf("message %d corrupt", i)
			}
			if buf.Hold() { // hold every message it allows: a stuck partition
				held = append(held, buf)
			} else {
				refused++
			}
			if live := f.live.Load(); live > MaxLiveBuffers {
				t.Fatalf("message %d: %d buffers live, want at most %d", i, live, MaxLiveBuffers)
			}
		}
		if refused == 0 {
			t.Fatalf("pass %d: no Hold refused", pass)
		}
		for _, b := range held {
			b.Release()
		}
		if got := f.live.Load(); got != 1 {
			t.Fatalf("pass %d: %d buffers live after every release, want 1", pass, got)
		}
		if pass == 0 {
			made = f.made
		} else if f.made != made {
			t.Fatalf("the second pass made %d buffers more; want the released ones reused", f.made-made)
		}
	}
}

// Without holders, a buffer whose bytes are all read is read into again
// from its start: a stream that keeps up reuses the start of one buffer,
// warm in the cache.
func TestFrameReaderReusesUnheldBuffer(t *testing.T) {
	const size = 1000
	var stream []byte
	for i := range 3000 {
		stream = append(stream, frame('d', body(i, size))...)
	}
	// Reads of ten whole messages: each read finds every byte read.
	f := NewFrameReader(&trickle{data: stream, step: 10 * (5 + size), err: io.EOF}, nil)
	first := f.cur
	for i := range 3000 {
		_, b, buf, err := f.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if buf != first || !bytes.Equal(b, body(i, size)) {
			t.Fatalf("message %d: buffer %p (first %p), %d bytes", i, buf, first, len(b))
		}
		if i%10 == 0 && &b[0] != &first.b[5] {
			t.Fatalf("message %d, the first of a read, is not at the buffer's start", i)
		}
	}
}

// A read error is returned; the bytes read before it are kept, and the
// next call goes on (as after a read deadline).
func TestFrameReaderKeepsBytesAcrossErrors(t *testing.T) {
	msg := frame('d', body(1, 100))
	src := &trickle{data: bytes.Clone(msg[:50]), step: 1 << 20, err: os.ErrDeadlineExceeded}
	f := NewFrameReader(src, nil)
	if _, _, _, err := f.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("next on half a message: %v, want the read's error", err)
	}
	src.data = bytes.Clone(msg[50:])
	typ, b, _, err := f.Next()
	if err != nil || typ != 'd' || !bytes.Equal(b, body(1, 100)) {
		t.Fatalf("next after the rest arrived: %q, %d bytes, %v", typ, len(b), err)
	}
}

func TestFrameReaderRejectsBadLength(t *testing.T) {
	for _, n := range []uint32{0, 3, maxMessageLen + 1} {
		b := []byte{'d', 0, 0, 0, 0, 'x'}
		binary.BigEndian.PutUint32(b[1:], n)
		f := NewFrameReader(&trickle{data: b, step: 100, err: io.EOF}, nil)
		if _, _, _, err := f.Next(); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("length %d: %v, want an invalid length error", n, err)
		}
	}
}

func TestBufferReleasedTooOftenPanics(t *testing.T) {
	f := NewFrameReader(&trickle{err: io.EOF}, nil)
	b := f.cur
	if !b.Hold() {
		t.Fatal("Hold refused on a fresh reader")
	}
	b.Release()
	b.Release() // the reader's own
	defer func() {
		if recover() == nil {
			t.Fatal("a third Release did not panic")
		}
	}()
	b.Release()
}
