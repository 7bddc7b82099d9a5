package replication

import "github.com/walrelay/walrelay/internal/pgwire"

// Buffer is one piece of the stream's receive buffer. The bytes of each
// message a Handler is given lie in one Buffer. A Handler that keeps them
// past the call (an outbox row's payload, in flight to Kafka) holds the
// buffer during the call (Hold, which may refuse: copy then) and releases
// it, from any goroutine, once it no longer uses them: the stream reuses a
// buffer only after every holder has released it.
type Buffer = pgwire.Buffer

// NewBuffer returns a Buffer outside any stream, held once by the caller
// (who releases it like any holder), for testing how a Handler holds and
// releases the buffers it is given. No bound applies to its holds.
func NewBuffer() *Buffer { return pgwire.NewBuffer() }
