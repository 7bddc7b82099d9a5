//go:build soak

package relay_test

// snapshotRows is the size of the initial-snapshot test's outbox: the
// issue's 200,000 rows (make soak).
const snapshotRows = 200_000
