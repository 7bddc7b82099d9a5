//go:build !race

package pgwire

// raceEnabled reports whether the test binary was built with -race.
const raceEnabled = false
