package main

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the daemon's module path; its packages are named by their
// directory below it (internal/relay).
const modulePath = "github.com/walrelay/walrelay/"

// modulePackages returns, by directory (internal/relay, cmd/walrelay),
// the walrelay packages each production package of the daemon's module
// imports (test files left out). Directories with a go.mod of their own
// (the app libraries), testdata and hidden ones are not the daemon's.
func modulePackages(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel != "." {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		bp, err := build.ImportDir(path, 0)
		if noGo := (*build.NoGoError)(nil); errors.As(err, &noGo) {
			return nil
		} else if err != nil {
			return err
		}
		var imps []string
		for _, imp := range bp.Imports {
			if p, ok := strings.CutPrefix(imp, modulePath); ok {
				imps = append(imps, p)
			}
		}
		out[rel] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deps returns every walrelay package pkg depends on, directly or not.
func deps(graph map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, d := range graph[p] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(pkg)
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// TestLayering holds the split of what was internal/admin (docs/DESIGN.md,
// "Where things live"): internal/operator (check, peek, advance) is the
// operator subcommands' and no internal package imports it;
// internal/postgres, which the daemon uses, imports neither the operator
// nor the Kafka, routing or configuration side; internal/cli (exit codes)
// is cmd's; and the slot monitor does not drag the publisher in.
func TestLayering(t *testing.T) {
	checkLayering(t, modulePackages(t, "../.."))
}

func checkLayering(t *testing.T, graph map[string][]string) {
	t.Helper()
	if _, ok := graph["internal/operator"]; !ok {
		t.Fatal("no package internal/operator: update TestLayering with the layout")
	}
	var pkgs []string
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		for _, imp := range graph[p] {
			if imp == "internal/operator" && strings.HasPrefix(p, "internal/") {
				t.Errorf("%s imports internal/operator, the operator subcommands' logic: only cmd/ may (move what it needs to internal/postgres)", p)
			}
			if imp == "internal/cli" && !strings.HasPrefix(p, "cmd/") {
				t.Errorf("%s imports internal/cli: how commands end (exit codes) is cmd's; return a sentinel or typed error that cmd maps", p)
			}
		}
	}
	for pkg, banned := range map[string][]string{
		"internal/slotmon":  {"internal/publisher", "internal/operator"},
		"internal/postgres": {"internal/operator", "internal/publisher", "internal/router", "internal/partition", "internal/config", "internal/cli", "internal/relay"},
	} {
		for _, d := range deps(graph, pkg) {
			if slices.Contains(banned, d) {
				t.Errorf("%s depends on %s (go list -deps ./%s)", pkg, d, pkg)
			}
		}
	}
}

// connectFuncs are the drivers' functions that open a Postgres
// connection, by import path.
var connectFuncs = map[string][]string{
	"github.com/jackc/pgx/v5":         {"Connect", "ConnectConfig", "ConnectWithOptions"},
	"github.com/jackc/pgx/v5/pgconn":  {"Connect", "ConnectConfig", "ConnectWithOptions"},
	"github.com/jackc/pgx/v5/pgxpool": {"New", "NewWithConfig"},
	"github.com/jackc/pgx/v5/stdlib":  {"OpenDB", "GetConnector"},
}

// connectExempt are the production directories that may open Postgres
// connections themselves: internal/pgsession, the one place, and the
// test and bench harnesses, whose connections set up servers and check
// what landed rather than read what walrelay relays.
var connectExempt = []string{
	"internal/pgsession",
	"internal/testenv",
	"internal/localpg",
	"internal/bench",
	"cmd/walrelay-demo",
	"examples/inbox", // an application built on inbox, with its own pool
}

// TestOneConnect fails when a production file outside connectExempt
// opens a Postgres connection with pgx, pgconn, pgxpool or database/sql's
// pgx driver instead of internal/pgsession, which pins the session
// settings (DateStyle, TimeZone, bytea_output, extra_float_digits) that
// make values read as the relay's stream reads them.
func TestOneConnect(t *testing.T) {
	for _, c := range connectCalls(t, "../..") {
		t.Errorf("%s: %s opens a Postgres connection: use internal/pgsession (Connect, ConnectConfig or ConnectReplication)", c.pos, c.call)
	}
}

type connectCall struct{ pos, call string }

// connectCalls lists the references to connectFuncs in the production Go
// files under root, outside connectExempt, testdata and other modules.
func connectCalls(t *testing.T, root string) []connectCall {
	t.Helper()
	var out []connectCall
	parseProductionFiles(t, root, connectExempt, func(fset *token.FileSet, rel string, f *ast.File) {
		names := map[string]string{} // local name → import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if _, ok := connectFuncs[p]; !ok {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if p == "github.com/jackc/pgx/v5" {
				name = "pgx"
			}
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if p, ok := names[x.Name]; ok && slices.Contains(connectFuncs[p], sel.Sel.Name) {
				pos := fset.Position(sel.Pos())
				pos.Filename = rel
				out = append(out, connectCall{pos: pos.String(), call: x.Name + "." + sel.Sel.Name})
			}
			return true
		})
	})
	return out
}

// parseProductionFiles parses each production (non-test) Go file of the
// daemon's module under root and calls fn with it, rel its path from root;
// directories in skip (relative to root), testdata, bin, hidden ones and
// other modules (outbox, inbox) are left out.
func parseProductionFiles(t *testing.T, root string, skip []string, fn func(fset *token.FileSet, rel string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || slices.Contains(skip, rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(fset, rel, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
