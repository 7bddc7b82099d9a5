package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines is the most lines a production Go file may have: a file
// longer than this holds more than one role, and the next engineer has to
// read all of it to change one (issue 35, "smaller rooms").
const maxFileLines = 600

// No production (non-test) Go file of the repository is longer than
// maxFileLines: the daemon's packages, cmd and the application modules,
// outside testdata. A file over it is split by role into files of the same
// package.
func TestFileSizes(t *testing.T) {
	const root = "../.."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".go") || strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		if n := bytes.Count(data, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it by role into files of the same package", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatalf("no Go file found under %s: the test checks nothing", root)
	}
}
