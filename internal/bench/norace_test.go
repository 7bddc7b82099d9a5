//go:build !race

package bench

// raceBuildFlags build the walrelay binary the smoke test runs like the
// test itself, so `go test -race` reuses its compiled packages.
var raceBuildFlags []string
