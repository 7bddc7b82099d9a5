package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/config"
)

// docs/configuration.md documents every option with its default; it must
// say what the code does (the README links it instead of a copy).
func TestOptionsTableMatchesCode(t *testing.T) {
	const doc = "../../docs/configuration.md"
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "<!-- options:begin")
	if !ok {
		t.Fatalf("%s has no options:begin marker", doc)
	}
	_, table, _ := strings.Cut(rest, "-->\n")
	table, _, ok = strings.Cut(table, "<!-- options:end -->")
	if !ok {
		t.Fatalf("%s has no options:end marker", doc)
	}
	def := config.Default()
	if want := optionsTable(config.Fields(&def)); table != want {
		t.Errorf("%s: the options table is stale; replace it with the output of `walrelay config --list`:\n%s", doc, want)
	}
	if n := strings.Count(string(text), "<!-- options:begin"); n != 1 {
		t.Errorf("%s has %d options:begin markers, want 1", doc, n)
	}
}

// The example config in docs/ must load and validate.
func TestExampleConfigLoads(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.BindFlags(fs)
	if err := fs.Parse([]string{"--config", "../../docs/walrelay.example.yaml"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs, nil)
	if err != nil {
		t.Fatalf("docs/walrelay.example.yaml: %v", err)
	}
	if cfg.Kafka.TopicReplicationFactor != 3 || cfg.Router.AdditionalPlacement != "type:header:eventType" {
		t.Errorf("example config not applied: %+v", cfg)
	}
}

// The README names the Go release go.mod requires, so a newcomer with an
// older Go knows before the build fails.
func TestREADMENamesGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + string(m[1]) + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line)", want)
	}
}

// The README is the page a newcomer reads in five minutes: the rest
// belongs in docs/ (issue 34 item 11).
func TestREADMEIsShort(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 300 {
		t.Errorf("README.md has %d lines; keep it under 300 and move details to docs/", n)
	}
}

// Every relative link in the README, the changelog and docs/*.md points
// to a file that exists and, for a #fragment into a Markdown file, to one
// of its headings (GitHub's anchors).
func TestREADMELinks(t *testing.T) {
	const root = "../.."
	files := []string{"README.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, filepath.ToSlash(rel))
	}
	anchors := map[string]map[string]bool{} // file (relative to root) -> its anchors
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(text))
		anchors[file] = a
		return a
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range proseLines(string(text)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", file, i+1, target, resolved)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", file, i+1, target, resolved, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check")
	}
}

// proseLines returns the lines of a Markdown text with fenced code blocks
// and inline code spans blanked, so that only real links are found (line
// numbers are kept).
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	code := regexp.MustCompile("`[^`]*`")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
			continue
		}
		lines[i] = code.ReplaceAllString(l, "``")
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings (lower case, punctuation but '-' and '_' dropped, spaces as
// '-', a repeated anchor suffixed -1, -2, ...) and its explicit
// <a id="..."> anchors.
func headingAnchors(text string) map[string]bool {
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	heading := regexp.MustCompile(`^#{1,6} +(.*?)\s*$`)
	explicit := regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	out := map[string]bool{}
	for _, l := range proseLinesKeepingCode(text) {
		for _, m := range explicit.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		h := m[1]
		h = linkText.ReplaceAllString(h, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", b.String(), n)
		}
		out[a] = true
	}
	return out
}

// proseLinesKeepingCode returns the lines outside fenced code blocks
// (a '#' there is a shell comment, not a heading).
func proseLinesKeepingCode(text string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}
