package schemareg_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlySchemaregImportsSR: franz-go's pkg/sr is used through this
// package alone, so that caching, waiting and the classification of
// refusals happen in one place. internal/testenv's test registry and
// internal/bench's (the registry walrelay-bench serves its walrelay) build
// on pkg/sr/srfake: they are registries, not clients.
func TestOnlySchemaregImportsSR(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"internal/schemareg": true, "internal/testenv": true, "internal/bench": true}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if (p == "github.com/twmb/franz-go/pkg/sr" || strings.HasPrefix(p, "github.com/twmb/franz-go/pkg/sr/")) && !allowed[filepath.ToSlash(rel)] {
				t.Errorf("%s imports %s: use internal/schemareg", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s; the walk missed the tree", checked, root)
	}
}
