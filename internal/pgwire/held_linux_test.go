package pgwire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldBody is message seq's body: seq, then a pattern that differs by seq,
// of a length that varies with it.
func heldBody(seq int) []byte {
	b := make([]byte, 50+(seq*37)%1500)
	binary.BigEndian.PutUint32(b, uint32(seq))
	for i := 4; i < len(b); i++ {
		b[i] = byte(seq*31 + i)
	}
	return b
}

// Holders keep receive buffers, on other goroutines, while the reader reads
// on into others over a loopback socket, through the read after a wait
// (rawRead) as the stream does when it keeps up with the walsender: each
// held body is still what was sent when its holder checks it, just before
// releasing it, and every buffer is released in the end. Under -race the
// reads are ones the race detector sees (rawread_race_linux.go), so a
// read into a buffer still held would also be reported as a race.
func TestHeldBuffersSurviveReadsIntoOthers(t *testing.T) {
	client, server := tcpPair(t)
	r := ownedReader(t.Context(), client, 2*time.Millisecond)
	if err := r.setDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	f := NewFrameReader(r, nil)

	const n = 20000
	go func() { // the walsender: bursts of messages, with pauses the reader waits out
		var out []byte
		for i := range n {
			out = append(out, frame('d', heldBody(i))...)
			if i%(1+i%64) == 0 || i == n-1 {
				if _, err := server.Write(out); err != nil {
					t.Errorf("writing: %v", err)
					return
				}
				out = out[:0]
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()

	type held struct {
		seq  int
		body []byte
		buf  *Buffer
	}
	work := make(chan held, 64)
	var wg sync.WaitGroup
	for range 2 { // holders: keep up to 200 bodies each, check and release the oldest
		wg.Go(func() {
			var kept []held
			check := func(h held) {
				if !bytes.Equal(h.body, heldBody(h.seq)) {
					t.Errorf("held message %d changed while the reader read on", h.seq)
				}
				h.buf.Release()
			}
			for h := range work {
				if kept = append(kept, h); len(kept) > 200 {
					check(kept[0])
					kept = kept[1:]
				}
			}
			for _, h := range kept {
				check(h)
			}
		})
	}

	bufs := map[*Buffer]bool{}
	holds, refused := 0, 0
	for i := range n {
		typ, b, buf, err := f.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if typ != 'd' || !bytes.Equal(b, heldBody(i)) {
			t.Fatalf("message %d: type %q, %d bytes, not what was sent", i, typ, len(b))
		}
		bufs[buf] = true
		if i%3 != 0 {
			continue
		}
		if !buf.Hold() {
			refused++
			continue
		}
		holds++
		work <- held{i, b, buf}
	}
	close(work)
	wg.Wait()

	t.Logf("%d holds, %d refused, %d buffers, %d reads after a wait (raw), %d waits", holds, refused, len(bufs), r.rawReads, r.waits)
	if r.rawReads == 0 {
		t.Fatal("no read after a wait: the test missed the raw read path")
	}
	if holds == 0 || len(bufs) < 2 {
		t.Fatalf("%d holds over %d buffers: the test needs the reader to read on while buffers are held", holds, len(bufs))
	}
	if got := f.live.Load(); got != 1 {
		t.Fatalf("%d buffers live after every release, want 1 (the reader's)", got)
	}
}

// raceChildEnv marks the child process TestRaceDetectorSeesReadAfterWait
// starts.
const raceChildEnv = "PGWIRE_TEST_RACE_CHILD"

// The race detector sees what the read after a wait writes into a receive
// buffer: a child process that keeps a body without holding its buffer,
// and reads it on another goroutine after the reader has read the next
// message into the same bytes, is reported as a data race. (With a raw
// read(2) in -race builds, it is not.) Linux only, like the read after a
// wait on the socket.
func TestRaceDetectorSeesReadAfterWait(t *testing.T) {
	if !raceEnabled {
		t.Skip("checks what the race detector reports: run with -race")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRaceChildReadsUnheldBody$", "-test.count=1", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), raceChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if !strings.Contains(string(out), "reads after a wait: 1\n") || !strings.Contains(string(out), "same bytes: true\n") {
		t.Fatalf("the child did not read the second message into the first's bytes after a wait (exit: %v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "WARNING: DATA RACE") {
		t.Fatalf("the race detector did not report the child's misuse (exit: %v):\n%s", err, out)
	}
}

// TestRaceChildReadsUnheldBody misuses a Buffer on purpose; it runs only as
// TestRaceDetectorSeesReadAfterWait's child.
func TestRaceChildReadsUnheldBody(t *testing.T) {
	if os.Getenv(raceChildEnv) == "" {
		t.Skip("run by TestRaceDetectorSeesReadAfterWait in a child process: it races on purpose")
	}
	client, server := tcpPair(t)
	r := ownedReader(t.Context(), client, 100*time.Millisecond)
	r.small = false // the first read does not wait
	if err := r.setDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	f := NewFrameReader(r, nil)
	if _, err := server.Write(frame('d', body(1, 1000))); err != nil {
		t.Fatal(err)
	}
	_, first, _, err := f.Next() // a small read: the next one waits
	if err != nil {
		t.Fatal(err)
	}
	// The misuse: first is kept past Next without holding its buffer, and
	// read later on another goroutine with nothing ordering that read
	// after the reader's.
	sum := make(chan int)
	go func() {
		time.Sleep(500 * time.Millisecond) // well after the second read
		s := 0
		for _, c := range first {
			s += int(c)
		}
		sum <- s
	}()
	// The second message arrives during the wait (which ends after 100ms
	// with fewer than smallRead bytes queued); all of the first was read
	// and nothing holds the buffer, so the read after the wait puts it at
	// the buffer's start, over the first's bytes.
	time.AfterFunc(20*time.Millisecond, func() { _, _ = server.Write(frame('d', body(2, 1000))) })
	_, second, _, err := f.Next()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("reads after a wait: %d\n", r.rawReads)
	fmt.Printf("same bytes: %v\n", &second[0] == &first[0])
	<-sum
}
