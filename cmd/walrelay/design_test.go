package main

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/DESIGN.md's "Where things live" names every package of the module
// and no other, and the packages it says import no other walrelay package
// (but the wire layer) do not.
func TestDesignMap(t *testing.T) {
	const root = "../.."
	design, err := os.ReadFile(filepath.Join(root, "docs/DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(design), "\n## Where things live\n")
	if !ok {
		t.Fatal(`docs/DESIGN.md has no "## Where things live" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var mapped []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9/_-]+)` \\|").FindAllStringSubmatch(section, -1) {
		mapped = append(mapped, m[1])
	}

	var pkgs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") && rel != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			if dir := filepath.ToSlash(filepath.Dir(rel)); !slices.Contains(pkgs, dir) {
				pkgs = append(pkgs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		if !slices.Contains(mapped, p) {
			t.Errorf("package %s is not in DESIGN.md's map", p)
		}
	}
	for _, p := range mapped {
		if !slices.Contains(pkgs, p) {
			t.Errorf("DESIGN.md's map names %s, which is no package", p)
		}
	}

	allowed := []string{"github.com/walrelay/walrelay/internal/pgwire", "github.com/walrelay/walrelay/internal/javaprops", "github.com/walrelay/walrelay/internal/connect", "github.com/walrelay/walrelay/internal/connect/avro", "github.com/walrelay/walrelay/internal/pgsession"}
	leaves := []string{"internal/connect", "internal/javaprops", "internal/pgsession"} // these import no walrelay package at all
	for _, leaf := range []string{"internal/replication", "internal/checkpoint", "internal/router", "internal/publisher", "internal/connect", "internal/javaprops", "internal/pgsession"} {
		bp, err := build.ImportDir(filepath.Join(root, leaf), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range bp.Imports {
			if strings.HasPrefix(imp, "github.com/walrelay/walrelay/") && (!slices.Contains(allowed, imp) || slices.Contains(leaves, leaf)) {
				t.Errorf("%s imports %s; DESIGN.md says it imports no walrelay package but internal/pgwire, internal/javaprops, internal/connect, internal/connect/avro and internal/pgsession (and those none but internal/connect/avro internal/connect)", leaf, imp)
			}
		}
	}
	// internal/connect/avro builds on internal/connect's model and on nothing else of walrelay's.
	bp, err := build.ImportDir(filepath.Join(root, "internal/connect/avro"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range bp.Imports {
		if strings.HasPrefix(imp, "github.com/walrelay/walrelay/") && imp != "github.com/walrelay/walrelay/internal/connect" {
			t.Errorf("internal/connect/avro imports %s; DESIGN.md says it imports internal/connect only", imp)
		}
	}
}
