// Package compose holds the tests of walrelay's container artifacts:
// docker-compose.yml, the files it mounts (deploy/, sql/, docs/grafana,
// docs/prometheus), the Dockerfile and .dockerignore, and docs/compose.md's
// "Try it with docker compose" section.
//
// In: those files, Debian's docker-compose (`docker-compose config`; no
// Docker engine is needed or used) and promtool, both installed by
// `make deps`, and the go toolchain (the Dockerfile's build command is run
// on the host). Out: test failures naming the file and the value at fault.
// A missing docker-compose or promtool fails the tests, never skips them.
//
// It has no code of its own.
package compose
