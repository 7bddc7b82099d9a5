package postgres

import "strings"

// oneLine joins the lines of a driver's error text into one, as
// cli.OneLine does for the error a command ends with (the same rule:
// lines trimmed, blank ones dropped, a line ending in ":" followed by a
// space, others by "; "), so that an explained error reads on one line
// in check's items, logs and /readyz too. It is kept here rather than
// imported so that internal/cli stays cmd's (TestLayering); TestOneLine
// checks the two agree.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var b strings.Builder
	prev := ""
	for l := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(prev, ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
		prev = l
	}
	return b.String()
}
