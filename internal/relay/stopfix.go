package relay

import "fmt"

// stopFix is what an operator does about a row relay.on_error=stop
// stopped on (ErrStopped): look at it, then fix its cause or skip it.
// Without an id (a row or message with none), only by position.
func stopFix(slot, id string) string {
	if id == "" {
		return fmt.Sprintf("see it with `walrelay slot peek %s`; fix its cause (relay.on_error) and run again, or skip it with `walrelay slot advance %s --to LSN` (docs/runbook.md, \"WalrelayPublishErrors\")", slot, slot)
	}
	return fmt.Sprintf("see it with `walrelay slot peek %s`; fix its cause (relay.on_error) and run again, or skip it with `walrelay slot advance %s --past-event %s` (docs/runbook.md, \"WalrelayPublishErrors\")", slot, slot, id)
}
