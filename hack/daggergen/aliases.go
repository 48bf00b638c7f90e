package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// enumAlias is an enum member the engine declares as another name for an
// existing member: `Enum.AliasView("GZIP", "Gzip", view)` in dagger's core.
type enumAlias struct {
	Alias, Target string
}

// enumAliases reads the enum aliases declared in the Go sources of dagger's
// core package (dir is the github.com/dagger/dagger module root).
//
// Why: the engine marks an alias member in its introspection with
// @enumValue(value: <target>), and the Go generator relies on that to emit
// the alias as a constant equal to its target (ImageLayerCompressionGzip and
// "GZIP" both mean "Gzip"). The SDL file shipped with dagger lists the alias
// members but not that directive, so without this the generator emits two
// constants with the same Go name and the code does not compile.
func enumAliases(dir string) ([]enumAlias, error) {
	files, err := filepath.Glob(filepath.Join(dir, "core", "*.go"))
	if err != nil {
		return nil, err
	}
	var out []enumAlias
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", f, err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "AliasView" && sel.Sel.Name != "Alias") {
				return true
			}
			alias, ok1 := stringLit(call.Args[0])
			target, ok2 := stringLit(call.Args[1])
			if ok1 && ok2 {
				out = append(out, enumAlias{Alias: alias, Target: target})
			}
			return true
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Alias != out[j].Alias {
			return out[i].Alias < out[j].Alias
		}
		return out[i].Target < out[j].Target
	})
	return out, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
