//go:build race

package relay

// raceEnabled: sync.Pool drops a quarter of what it is given under the
// race detector, so allocation counts mean nothing there.
const raceEnabled = true
