package main

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	// Sets dummy DAGGER_SESSION_PORT/TOKEN before internal/dagger's init
	// runs; see the package comment for why the order is guaranteed.
	"github.com/patina-dev/patina/internal/dagenv"
	"github.com/patina-dev/patina/internal/dagger"
	"github.com/patina-dev/patina/internal/daggerws"
	"github.com/patina-dev/patina/internal/pipeline"
)

// TestInitOrder checks that internal/dagenv ran before internal/dagger's
// init (had it not, this binary would have panicked before any test).
func TestInitOrder(t *testing.T) {
	if got := os.Getenv("DAGGER_SESSION_PORT"); got != dagenv.Port {
		t.Errorf("DAGGER_SESSION_PORT: exp %q, got %q", dagenv.Port, got)
	}
	if got := os.Getenv("DAGGER_SESSION_TOKEN"); got != dagenv.Token {
		t.Errorf("DAGGER_SESSION_TOKEN: exp %q, got %q", dagenv.Token, got)
	}
	if dag == nil {
		t.Fatal("dag is nil")
	}
}

// TestFunctionsAreLazy calls every function without an engine: building
// the query must not panic; the first thing sent to the engine (Build and
// BuildImage resolve their image first) fails with the engine connection
// refused, not with an image error.
func TestFunctionsAreLazy(t *testing.T) {
	m := New(dag.Directory(), "", "")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Build(ctx, "linux/arm64", "v1.2.3")
	assertConnRefused(t, "Build", err)
	var unresolved *pipeline.UnresolvedImageError
	if errors.As(err, &unresolved) {
		t.Errorf("Build: a refused connection is not an unresolved image: %v", err)
	}
	_, err = m.BuildImage(ctx, "", "")
	assertConnRefused(t, "BuildImage", err)
	_, err = m.Test(ctx, false)
	assertConnRefused(t, "Test", err)
	_, err = m.Test(ctx, true)
	assertConnRefused(t, "Test(integration)", err)
	_, err = m.Lint(ctx)
	assertConnRefused(t, "Lint", err)

	// The workspace functions ask the engine for the sidecar's endpoint
	// once their arguments are known to be good.
	ws := m.Workspace(testSidecar(), dag.SetSecret("token", "t"), "w")
	_, err = ws.List(ctx, "table")
	assertConnRefused(t, "Workspace(...).List", err)
	_, err = ws.Create(ctx, "/src/app", "main", "golang:1.26.8-bookworm")
	assertConnRefused(t, "Workspace(...).Create", err)
	_, err = ws.Exec(ctx, "go test ./...", "default", 1000, true, false)
	assertConnRefused(t, "Workspace(...).Exec", err)
	_, err = ws.Diff(ctx)
	assertConnRefused(t, "Workspace(...).Diff", err)
	_, err = ws.Commit(ctx, "message")
	assertConnRefused(t, "Workspace(...).Commit", err)
	_, err = ws.Merge(ctx, "")
	assertConnRefused(t, "Workspace(...).Merge", err)
	_, err = ws.Delete(ctx, false)
	assertConnRefused(t, "Workspace(...).Delete", err)
	_, err = ws.Directory(ctx, 0, 0)
	assertConnRefused(t, "Workspace(...).Directory", err)
}

// testSidecar is what --sidecar tcp://localhost:7070 gives the module.
func testSidecar() *dagger.Service {
	return dag.Host().Service([]dagger.PortForward{{Frontend: 7070, Backend: 7070}})
}

func assertConnRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s: exp a refused engine connection, got %v", what, err)
	}
}

// TestArgumentsAreValidated checks that bad arguments fail the call before
// anything is sent to the engine.
func TestArgumentsAreValidated(t *testing.T) {
	m := New(dag.Directory(), "", "")
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		platform string
		version  string
	}{
		{"platform without arch", "linux", ""},
		{"unknown arm variant", "linux/arm/v9", ""},
		{"version with a space", "", "1.0 beta"},
		{"version with a quote", "", `1.0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Build(ctx, dagger.Platform(tc.platform), tc.version); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("Build: exp an argument error before the engine is asked, got %v", err)
			}
			if _, err := m.BuildImage(ctx, dagger.Platform(tc.platform), tc.version); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("BuildImage: exp an argument error before the engine is asked, got %v", err)
			}
		})
	}
}

// TestWorkspaceArgumentsAreValidated checks that the workspace functions
// refuse bad arguments before asking the engine for anything (had they
// asked, the error would be a refused connection instead).
func TestWorkspaceArgumentsAreValidated(t *testing.T) {
	m := New(dag.Directory(), "", "")
	secret := dag.SetSecret("token", "t")
	unnamed := m.Workspace(testSidecar(), secret, "")
	named := m.Workspace(testSidecar(), secret, "w")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() (string, error)
		exp  error
	}{
		{"exec without --name", func() (string, error) { return unnamed.Exec(ctx, "true", "default", 0, false, false) }, daggerws.ErrNoWorkspace},
		{"diff without --name", func() (string, error) { return unnamed.Diff(ctx) }, daggerws.ErrNoWorkspace},
		{"commit without --name", func() (string, error) { return unnamed.Commit(ctx, "m") }, daggerws.ErrNoWorkspace},
		{"merge without --name", func() (string, error) { return unnamed.Merge(ctx, "") }, daggerws.ErrNoWorkspace},
		{"delete without --name", func() (string, error) { return unnamed.Delete(ctx, false) }, daggerws.ErrNoWorkspace},
		{"directory without --name", func() (string, error) { return dirCall(unnamed.Directory(ctx, 0, 0)) }, daggerws.ErrNoWorkspace},
		{"directory with negative --max-files", func() (string, error) { return dirCall(named.Directory(ctx, -1, 0)) }, daggerws.ErrInvalid},
		{"directory with negative --max-bytes", func() (string, error) { return dirCall(named.Directory(ctx, 0, -1)) }, daggerws.ErrInvalid},
		{"create with a relative repo", func() (string, error) { return named.Create(ctx, ".", "", "") }, daggerws.ErrInvalid},
		{"create with a base but no repo", func() (string, error) { return named.Create(ctx, "", "main", "") }, daggerws.ErrInvalid},
		{"list in an unknown format", func() (string, error) { return named.List(ctx, "yaml") }, daggerws.ErrInvalid},
		{"exec of nothing", func() (string, error) { return named.Exec(ctx, " ", "default", 0, false, false) }, daggerws.ErrInvalid},
		{"exec with a negative timeout", func() (string, error) { return named.Exec(ctx, "true", "default", -1, false, false) }, daggerws.ErrInvalid},
		{"commit without a message", func() (string, error) { return named.Commit(ctx, "") }, daggerws.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.call()
			if !errors.Is(err, tc.exp) {
				t.Errorf("exp %v, got %q, %v", tc.exp, out, err)
			}
		})
	}
}

// dirCall adapts Directory's result to the table's (string, error).
func dirCall(d *dagger.Directory, err error) (string, error) {
	if d != nil {
		return "a directory", err
	}
	return "", err
}

// TestImageArguments: bad image references fail every function that uses
// them, naming the flag, before anything is sent to the engine; the
// defaults are the pinned images.
func TestImageArguments(t *testing.T) {
	m := New(dag.Directory(), "", "")
	if got, err := m.images(); err != nil || got != pipeline.DefaultImages() {
		t.Errorf("images with no arguments: exp the pinned ones, got %+v, %v", got, err)
	}
	m = New(dag.Directory(), "mirror.example/golang:1.26", "")
	if got, err := m.images(); err != nil || got.Go != "mirror.example/golang:1.26" || got.Runtime != pipeline.RuntimeImage {
		t.Errorf("images with --go-image: exp it and the other defaults, got %+v, %v", got, err)
	}

	ctx := context.Background()
	for _, tc := range []struct {
		flag string
		m    *Patina
	}{
		{"--go-image", New(dag.Directory(), "Not An Image", "")},
		{"--runtime-image", New(dag.Directory(), "", "debian:bad tag")},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if err == nil || !strings.HasPrefix(err.Error(), tc.flag+" ") {
					t.Errorf("%s: exp an error naming %s, got %v", what, tc.flag, err)
				}
			}
			_, err := tc.m.BuildImage(ctx, "", "")
			check("BuildImage", err)
			_, err = tc.m.Test(ctx, true)
			check("Test(integration)", err)
			if tc.flag == "--go-image" {
				_, err = tc.m.Build(ctx, "", "")
				check("Build", err)
				_, err = tc.m.Lint(ctx)
				check("Lint", err)
			}
		})
	}
}

// TestImageDefaults checks that New's +default pragmas are the pinned
// images of internal/pipeline (what --help shows is what a call without
// the flag uses).
func TestImageDefaults(t *testing.T) {
	defaults := map[string]string{}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range file.Decls {
		d, ok := decl.(*ast.FuncDecl)
		if !ok || d.Name.Name != "New" {
			continue
		}
		for _, p := range params(file, d) {
			for _, line := range pragmas(p.doc) {
				if v, ok := strings.CutPrefix(line, "+default="); ok {
					var s string
					if err := json.Unmarshal([]byte(v), &s); err != nil {
						t.Fatalf("+default of %s is not a JSON string: %v", p.field.Names[0].Name, err)
					}
					defaults[p.field.Names[0].Name] = s
				}
			}
		}
	}
	exp := map[string]string{"goImage": pipeline.GoImage, "runtimeImage": pipeline.RuntimeImage}
	if !maps.Equal(exp, defaults) {
		t.Errorf("New's +default values: exp %q, got %q", exp, defaults)
	}
}

// TestCachePolicy checks that every function that talks to the sidecar
// (Workspace and everything on PatinaWorkspace) is marked +cache="never",
// and that the others carry no cache pragma. The engine caches a function's
// result by its arguments (for up to 7 days by default): without the mark a
// second `workspace ... list` returns the first one's answer, however the
// sidecar changed meanwhile. Build, BuildImage, Test and Lint depend only on
// their inputs (source, images, arguments) and stay cached.
func TestCachePolicy(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var never, cached []string
	for _, decl := range file.Decls {
		d, ok := decl.(*ast.FuncDecl)
		if !ok || !d.Name.IsExported() {
			continue
		}
		recv := receiver(d)
		if recv != "Patina" && recv != "PatinaWorkspace" {
			continue
		}
		name := recv + "." + d.Name.Name
		var policy []string
		for _, line := range pragmas(d.Doc) {
			if strings.HasPrefix(line, "+cache") {
				policy = append(policy, line)
			}
		}
		talks := recv == "PatinaWorkspace" || d.Name.Name == "Workspace"
		switch {
		case talks && slices.Equal(policy, []string{`+cache="never"`}):
			never = append(never, name)
		case talks:
			t.Errorf("%s talks to the sidecar: exp exactly one `+cache=\"never\"` line in its doc comment, got %q", name, policy)
		case len(policy) == 0:
			cached = append(cached, name)
		default:
			t.Errorf("%s: exp no cache pragma (its result depends only on its inputs), got %q", name, policy)
		}
	}
	// Guard against the test looking at nothing.
	expNever := []string{"Patina.Workspace", "PatinaWorkspace.Create", "PatinaWorkspace.List", "PatinaWorkspace.Exec",
		"PatinaWorkspace.Diff", "PatinaWorkspace.Commit", "PatinaWorkspace.Merge", "PatinaWorkspace.Delete", "PatinaWorkspace.Directory"}
	for _, name := range expNever {
		if !slices.Contains(never, name) {
			t.Errorf("exp %s among the never-cached functions, got %q", name, never)
		}
	}
	if exp := []string{"Patina.Build", "Patina.BuildImage", "Patina.Test", "Patina.Lint"}; !slices.Equal(exp, cached) {
		t.Errorf("cached functions: exp %q, got %q", exp, cached)
	}
}

// pragmas returns a comment's Dagger pragma lines ("+name=value"), trimmed.
func pragmas(g *ast.CommentGroup) []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, c := range g.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if strings.HasPrefix(line, "+") {
			out = append(out, line)
		}
	}
	return out
}

// TestObjectNamesAvoidCoreTypes checks that no object of the module is
// named like a type of the engine's API. The engine namespaces a module's
// objects (Workspace would become PatinaWorkspace) only when the name is
// not already a known type; core has a Workspace, so an object named
// Workspace would be taken for core's (dagger core/module.go,
// namespaceTypeDef). Hence PatinaWorkspace.
func TestObjectNamesAvoidCoreTypes(t *testing.T) {
	core := map[string]bool{}
	fset := token.NewFileSet()
	api, err := parser.ParseFile(fset, "internal/dagger/dagger.gen.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range api.Decls {
		if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
			for _, spec := range d.Specs {
				core[spec.(*ast.TypeSpec).Name.Name] = true
			}
		}
	}
	if !core["Workspace"] || !core["Container"] {
		t.Fatalf("exp core's Workspace and Container among the API's types, got %d types", len(core))
	}
	for _, name := range objectNames(t) {
		if core[name] {
			t.Errorf("object %s: named like the engine's type %s; prefix it with Patina", name, name)
		}
	}
}

// objectNames returns main.go's exported struct types (the module's objects).
func objectNames(t *testing.T) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, decl := range file.Decls {
		if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
			for _, spec := range d.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() {
					names = append(names, ts.Name.Name)
				}
			}
		}
	}
	return names
}

// TestHelpText checks that the module, its objects, their fields and every
// function and argument have doc comments: they are what `dagger call
// --help` and `dagger functions` show.
func TestHelpText(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if text(file.Doc) == "" {
		t.Error("main.go: no package (module) description")
	}

	objects := map[string]bool{}
	for _, name := range objectNames(t) {
		objects[name] = true
	}
	functions := 0
	for _, decl := range file.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || !objects[ts.Name.Name] {
					continue
				}
				if text(d.Doc) == "" {
					t.Errorf("type %s: no doc comment", ts.Name.Name)
				}
				st := ts.Type.(*ast.StructType)
				for _, f := range st.Fields.List {
					for _, n := range f.Names {
						if n.IsExported() && text(f.Doc) == "" {
							t.Errorf("field %s.%s: no doc comment", ts.Name.Name, n.Name)
						}
					}
				}
			}
		case *ast.FuncDecl:
			if !d.Name.IsExported() || !(d.Name.Name == "New" || objects[receiver(d)]) {
				continue
			}
			functions++
			if text(d.Doc) == "" {
				t.Errorf("%s: no doc comment", d.Name.Name)
			}
			for _, p := range params(file, d) {
				if isContext(p.field.Type) {
					continue
				}
				for _, n := range p.field.Names {
					if text(p.doc) == "" {
						t.Errorf("%s(%s): no doc comment on the argument", d.Name.Name, n.Name)
					}
				}
			}
		}
	}
	if functions < 14 {
		t.Errorf("exp New, Build, BuildImage, Test, Lint, Workspace and its eight functions at least, found %d functions", functions)
	}
}

// TestSourceIgnore checks that New's +ignore pragma is pipeline.SourceIgnore.
func TestSourceIgnore(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	found := false
	for _, decl := range file.Decls {
		d, ok := decl.(*ast.FuncDecl)
		if !ok || d.Name.Name != "New" {
			continue
		}
		for _, p := range params(file, d) {
			if p.doc == nil {
				continue
			}
			for _, c := range p.doc.List {
				line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
				if list, ok := strings.CutPrefix(line, "+ignore="); ok {
					found = true
					if err := json.Unmarshal([]byte(list), &got); err != nil {
						t.Fatalf("+ignore is not a JSON list: %v", err)
					}
				}
			}
		}
	}
	if !found {
		t.Fatal("New: no +ignore pragma")
	}
	if exp := pipeline.SourceIgnore(); !slices.Equal(exp, got) {
		t.Errorf("+ignore: exp %q, got %q", exp, got)
	}
}

type param struct {
	field *ast.Field
	doc   *ast.CommentGroup
}

// params returns d's parameters with the comments written above each one
// (go/parser attaches no Doc to parameters; Dagger reads them by position,
// as this does).
func params(file *ast.File, d *ast.FuncDecl) []param {
	var out []param
	lo := d.Type.Params.Opening
	for _, f := range d.Type.Params.List {
		p := param{field: f}
		for _, g := range file.Comments {
			if g.Pos() > lo && g.End() < f.Pos() {
				p.doc = g
			}
		}
		out = append(out, p)
		lo = f.End()
	}
	return out
}

// receiver is the type name of a method's pointer receiver ("" otherwise).
func receiver(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) != 1 {
		return ""
	}
	star, ok := d.Recv.List[0].Type.(*ast.StarExpr)
	if !ok {
		return ""
	}
	if id, ok := star.X.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isContext(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "context" && sel.Sel.Name == "Context"
}

// text is a comment's text without Dagger pragma lines (+optional, ...).
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(g.Text(), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "+") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestFailedStepsAreNotCached checks that no exec in main.go accepts a
// failure as a result (Expect: ReturnTypeAny, or any Expect): the engine
// caches an exec that succeeded, so a failed `test` run that way was
// replayed from the cache until an input changed. A failing step must be
// the engine's error, which it does not cache; execFailure turns that
// error back into the step's outcome.
func TestFailedStepsAreNotCached(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Expect" {
				t.Errorf("%s: an exec's Expect is set: a failure would be a cached result", fset.Position(n.Pos()))
			}
		case *ast.SelectorExpr:
			if n.Sel.Name == "ReturnTypeAny" || n.Sel.Name == "ReturnTypeFailure" {
				t.Errorf("%s: %s makes a failed exec a cached result", fset.Position(n.Pos()), n.Sel.Name)
			}
		}
		return true
	})

	step := pipeline.Step{Name: "go test", Args: []string{"go", "test", "./..."}}
	for _, tc := range []struct {
		name string
		in   dagger.ExecError
		exp  int
	}{
		{"exit code kept", dagger.ExecError{ExitCode: 1, Stdout: "--- FAIL: TestX\n", Stderr: "FAIL\n"}, 1},
		{"no exit code: could not start", dagger.ExecError{Stderr: "exec: go: not found"}, 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := execFailure(step, &tc.in)
			if o.ExitCode != tc.exp || o.Stdout != tc.in.Stdout || o.Stderr != tc.in.Stderr || o.Step.Name != step.Name {
				t.Errorf("exp exit %d with the error's output, got %+v", tc.exp, o)
			}
			if err := pipeline.Check(o); err == nil {
				t.Error("a failed step's outcome passes the check")
			}
		})
	}
}

// TestReadmeExportsAreIgnored checks that every path README's `dagger call`
// lines write into the repository (`export --path P`, `> P`) is in the
// module's source +ignore list and in .gitignore: otherwise the next call
// uploads it as module source (and git shows it as new).
func TestReadmeExportsAreIgnored(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	gitignore, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, line := range strings.Split(string(gitignore), "\n") {
		if line = strings.TrimSuffix(strings.TrimSpace(line), "/"); strings.HasPrefix(line, "/") {
			ignored[strings.TrimPrefix(line, "/")] = true
		}
	}
	written := regexp.MustCompile(`(?:export --path|>)\s+(\./)?([A-Za-z0-9._-]+)\s*$`)
	var paths []string
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "dagger call ") {
			continue
		}
		if m := written.FindStringSubmatch(line); m != nil {
			paths = append(paths, m[2])
		}
	}
	if len(paths) < 4 {
		t.Fatalf("exp README's dagger call lines to write several files, found %q", paths)
	}
	for _, p := range paths {
		if !slices.Contains(pipeline.SourceIgnore(), p) {
			t.Errorf("%s: written by a README line, not in the module's +ignore", p)
		}
		if !ignored[p] {
			t.Errorf("%s: written by a README line, not in .gitignore (as /%s)", p, p)
		}
	}
}
