package localpg

import (
	"os"
	"strings"
)

// TailFile returns the last n lines of the file at path, or "" when path
// is empty, n is not positive or the file cannot be read. Cluster.LogTail
// uses it for the server log, and the bench harness for its children's
// logs: both add a log's end to an error about the process that wrote it.
func TailFile(path string, n int) string {
	if path == "" || n <= 0 {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
