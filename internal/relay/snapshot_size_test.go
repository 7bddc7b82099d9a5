//go:build !soak

package relay_test

// snapshotRows is the size of the initial-snapshot test's outbox; the
// soak build (make soak) uses 200,000.
const snapshotRows = 20_000
