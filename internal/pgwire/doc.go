// Package pgwire is the byte layer of a logical replication connection
// that walrelay takes over from pgconn once it is connected and idle.
//
// In: a *pgconn.PgConn (Hijack) whose reads went through a Reader (NewReader,
// installed with pgconn.Config.BuildFrontend). Out: the backend's messages
// (type byte and body) in reference-counted receive Buffers, whose bytes a
// caller may keep by holding the Buffer; and, written to the server,
// START_REPLICATION and standby status updates with the positions the
// caller gives.
//
// It owns the hijacked socket: framing, the receive buffers and their bound,
// read deadlines, and the socket tuning that batches reads (Reader). It
// does not decode pgoutput, choose the positions it reports, retry or
// reconnect: that is internal/replication's job.
package pgwire
