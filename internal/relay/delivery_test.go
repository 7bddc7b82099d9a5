package relay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The delivery mode's boundaries, as the code states them (delivery.go):
// the relay and the handler hold the mode as the delivery interface only
// (a field of a concrete mode's type would bring back "if it is set"
// checks), the handler and the modes hold no *Relay (their dependencies
// are the parts they use), and nothing reaches Kafka around the
// publisher (its Client).
func TestDeliveryBoundaries(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]bool{"Relay": true, "handler": true, "transactions": true, "atLeastOnce": true}
	forbidden := map[string]map[string]bool{
		"Relay":        {"*transactions": true, "*atLeastOnce": true},
		"handler":      {"*Relay": true, "*transactions": true, "*atLeastOnce": true},
		"transactions": {"*Relay": true},
		"atLeastOnce":  {"*Relay": true},
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok || !holders[n.Name.Name] {
					return true
				}
				seen[n.Name.Name] = true
				for _, fld := range st.Fields.List {
					if typ := types(fld.Type); forbidden[n.Name.Name][typ] {
						t.Errorf("%s: %s has a field of type %s", fset.Position(fld.Pos()), n.Name.Name, typ)
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Client" && len(n.Args) == 0 {
					t.Errorf("%s: a call of Client(): reach Kafka through the publisher's methods", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	for name := range holders {
		if !seen[name] {
			t.Errorf("type %s not found: update this test", name)
		}
	}
}

// types is a field's type as written, for the simple forms the check
// needs (T, *T).
func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + types(e.X)
	}
	return ""
}
