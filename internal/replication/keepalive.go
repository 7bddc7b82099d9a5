package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/pgwire"
)

// keeper is what KeepAlive needs of a session: the stream, its connection
// and the loop's reporter. The loop puts one in the context it passes to
// the Handler.
type keeper struct {
	s   *Stream
	w   *pgwire.Conn
	rep *reporter
}

type keeperKey struct{}

// withKeeper returns ctx carrying the session's keeper, for KeepAlive.
func withKeeper(ctx context.Context, k *keeper) context.Context {
	return context.WithValue(ctx, keeperKey{}, k)
}

// KeepAlive keeps a session alive while a Handler waits: called with the
// ctx the stream passed to the Handler, on the stream's goroutine (from
// within the Handler call), it sends a standby status update with the
// Checkpointer's Confirmed when one is due, as the stream's loop does
// between messages (soon after Confirmed moved, and every
// Config.StatusInterval anyway). The walsender ends a session that sends
// nothing for wal_sender_timeout (60s by default), so a Handler that may
// block longer (walrelay waiting for a schema registry that is down) calls
// it every so often, e.g. every StatusInterval or less.
//
// It reads nothing from the connection: while the Handler waits, the
// stream stays where it is (backpressure: Postgres keeps the WAL). It is a
// no-op for any other context (a snapshot's rows, a test's). An error
// means the session is lost: it wraps ErrRestartSession, and a Handler
// that returns it has the stream reconnect.
func KeepAlive(ctx context.Context) error {
	k, _ := ctx.Value(keeperKey{}).(*keeper)
	if k == nil {
		return nil
	}
	if err := k.s.ended(); err != nil {
		return err // EndSession: the Handler returns it, the stream reconnects
	}
	now := time.Now()
	k.rep.plan(now, k.s.cp)
	if now.Before(k.rep.due) {
		return nil
	}
	if err := k.s.report(k.w, k.rep, now); err != nil {
		return fmt.Errorf("keeping the session on slot %q alive: %w: %w", k.s.cfg.Slot, ErrRestartSession, err)
	}
	return nil
}
