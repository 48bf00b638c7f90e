// Command daggergen regenerates the Dagger module's generated Go code
// (dagger.gen.go and internal/dagger/) without a dagger CLI or engine.
//
// From the repository root (this directory is its own Go module, hence -C;
// from inside it, `go run .` and `go run . -check` do the same):
//
//	go -C hack/daggergen run .          # regenerate and write the files
//	go -C hack/daggergen run . -check   # fail if the committed files are stale
//
// It runs dagger's own Go code generator (github.com/dagger/dagger/cmd/codegen
// at the version pinned in this directory's go.mod, which must equal
// dagger.json's engineVersion) against the engine schema shipped in that same
// module (docs/docs-graphql/schema.graphqls), converted to the introspection
// JSON the generator normally gets from a live engine. The generation happens
// in a temporary copy of the repository with the old generated files removed,
// as the engine does, so the result does not depend on what was there before
// and running it twice gives identical files. The copy is then built
// (`go build .`) to catch generated code that does not compile against the
// pinned go.mod.
//
// What it does not do, unlike `dagger develop`: run the generator's
// post-commands (`go get -u dagger.io/dagger@<commit>` and `go mod tidy`).
// The root go.mod is pinned by hand; see README.md in this directory for
// that and the other differences.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/dagger/dagger/cmd/codegen/generator"
	gogenerator "github.com/dagger/dagger/cmd/codegen/generator/go"
	"github.com/dagger/dagger/cmd/codegen/introspection"
)

const (
	daggerModule   = "github.com/dagger/dagger"
	schemaSubpath  = "docs/docs-graphql/schema.graphqls"
	genFile        = "dagger.gen.go"
	genDir         = "internal/dagger"
	maxCodegenPass = 5
)

func main() {
	var opts options
	flag.StringVar(&opts.root, "root", "", "root of the Dagger module (default: nearest directory above the working directory holding dagger.json)")
	flag.BoolVar(&opts.check, "check", false, "do not write: fail if the committed generated files differ from a fresh generation")
	flag.StringVar(&opts.schema, "schema", "", "engine schema in SDL form (default: "+schemaSubpath+" of the pinned "+daggerModule+" module)")
	flag.StringVar(&opts.dumpIntrospection, "dump-introspection", "", "also write the introspection JSON given to codegen to this file")
	flag.BoolVar(&opts.verbose, "v", false, "log what the generator does")
	flag.Parse()

	level := slog.LevelWarn
	if opts.verbose {
		level = slog.LevelInfo
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	if err := run(context.Background(), opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "daggergen:", err)
		os.Exit(1)
	}
}

type options struct {
	root              string
	check             bool
	schema            string
	dumpIntrospection string
	verbose           bool
}

// daggerJSON is the part of dagger.json that generation depends on.
type daggerJSON struct {
	Name          string `json:"name"`
	EngineVersion string `json:"engineVersion"`
	SDK           struct {
		Source string `json:"source"`
	} `json:"sdk"`
}

// errStale is returned by -check when the committed files differ.
var errStale = errors.New("generated files are out of date: run `go -C hack/daggergen run .` and commit the result")

func run(ctx context.Context, opts options, stdout io.Writer) error {
	root, err := findRoot(opts.root)
	if err != nil {
		return err
	}
	mod, err := readDaggerJSON(root)
	if err != nil {
		return err
	}
	version, err := codegenVersion()
	if err != nil {
		return err
	}
	if mod.EngineVersion != version {
		return fmt.Errorf("dagger.json engineVersion is %s but hack/daggergen links %s@%s: bump one to match the other", mod.EngineVersion, daggerModule, version)
	}

	daggerDir, err := moduleDir(ctx, daggerModule, version)
	if err != nil {
		return err
	}
	schemaPath := opts.schema
	if schemaPath == "" {
		schemaPath = filepath.Join(daggerDir, filepath.FromSlash(schemaSubpath))
	}
	sdl, err := os.ReadFile(schemaPath)
	if err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	aliases, err := enumAliases(daggerDir)
	if err != nil {
		return err
	}
	resp, err := introspect(string(sdl), version, aliases)
	if err != nil {
		return err
	}
	if opts.dumpIntrospection != "" {
		js, err := json.MarshalIndent(resp, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(opts.dumpIntrospection, append(js, '\n'), 0o644); err != nil {
			return err
		}
	}

	tmp, err := os.MkdirTemp("", "daggergen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := copyModule(root, tmp); err != nil {
		return fmt.Errorf("copy module: %w", err)
	}

	// A go.work from the caller's environment must not change how the copy
	// is loaded and built.
	os.Setenv("GOWORK", "off")

	if err := quietly(opts.verbose, func() error {
		return generate(ctx, tmp, mod.Name, version, resp)
	}); err != nil {
		return err
	}
	if err := goBuild(ctx, tmp); err != nil {
		return fmt.Errorf("generated code does not build against go.mod (fix go.mod pins or main.go): %w", err)
	}

	fresh, err := collect(tmp)
	if err != nil {
		return err
	}
	// The generator formats its output already; gofmt again so that what is
	// committed is gofmt-clean whatever a future generator does.
	for rel, b := range fresh {
		if fresh[rel], err = format.Source(b); err != nil {
			return fmt.Errorf("gofmt %s: %w", rel, err)
		}
	}
	committed, err := collect(root)
	if err != nil {
		return err
	}
	diffs := diff(committed, fresh)

	if opts.check {
		if len(diffs) == 0 {
			fmt.Fprintf(stdout, "daggergen: %d generated files are up to date (dagger %s)\n", len(fresh), version)
			return nil
		}
		for _, d := range diffs {
			fmt.Fprintln(stdout, d)
		}
		return errStale
	}

	if err := apply(root, committed, fresh); err != nil {
		return err
	}
	for _, d := range diffs {
		fmt.Fprintln(stdout, d)
	}
	fmt.Fprintf(stdout, "daggergen: %d generated files written, %d changed (dagger %s)\n", len(fresh), len(diffs), version)
	return nil
}

// findRoot returns dir if set, else the nearest directory at or above the
// working directory that holds dagger.json.
func findRoot(dir string) (string, error) {
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(abs, "dagger.json")); err != nil {
			return "", fmt.Errorf("-root %s: %w", dir, err)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "dagger.json")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no dagger.json at or above %s: pass -root", wd)
		}
	}
}

func readDaggerJSON(root string) (daggerJSON, error) {
	var mod daggerJSON
	b, err := os.ReadFile(filepath.Join(root, "dagger.json"))
	if err != nil {
		return mod, err
	}
	if err := json.Unmarshal(b, &mod); err != nil {
		return mod, fmt.Errorf("dagger.json: %w", err)
	}
	if mod.Name == "" {
		return mod, fmt.Errorf("dagger.json: no name")
	}
	if mod.SDK.Source != "go" {
		return mod, fmt.Errorf("dagger.json: sdk.source is %q, want \"go\"", mod.SDK.Source)
	}
	return mod, nil
}

// codegenVersion is the version of github.com/dagger/dagger linked into this
// binary: the generator that runs and the schema it reads come from it.
func codegenVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("no build info in binary")
	}
	for _, dep := range info.Deps {
		if dep.Path == daggerModule {
			if dep.Replace != nil {
				return "", fmt.Errorf("%s is replaced in go.mod: daggergen needs a released version", daggerModule)
			}
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("%s not in build info", daggerModule)
}

// moduleDir returns the module cache directory of path@version, downloading
// it through the module proxy if needed.
func moduleDir(ctx context.Context, path, version string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	var m struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", path, version, m.Error)
	}
	return m.Dir, nil
}

// copyModule copies the files of the Go module at src into dst, leaving out
// .git, nested modules (directories with their own go.mod, such as this
// tool) and the generated files, which the engine also deletes before it
// generates.
func copyModule(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == genDir {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if rel == genFile || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// generate runs dagger's module generator in dir as the engine's
// `codegen generate-module` does, looping while it asks for another pass,
// and keeps only the generated Go files (not the go.mod/go.sum it proposes:
// the module's go.mod is pinned by hand).
func generate(ctx context.Context, dir, name, version string, resp *introspection.Response) error {
	schema := resp.Schema
	generator.SetSchemaParents(schema)
	g := &gogenerator.GoGenerator{Config: generator.Config{
		Lang:      generator.SDKLangGo,
		OutputDir: dir,
		ModuleConfig: &generator.ModuleGeneratorConfig{
			ModuleName:       name,
			ModuleSourcePath: ".",
			ModuleParentPath: ".",
			LibVersion:       version,
		},
	}}
	for pass := 1; pass <= maxCodegenPass; pass++ {
		st, err := g.GenerateModule(ctx, schema, resp.SchemaVersion)
		if err != nil {
			return fmt.Errorf("codegen pass %d: %w", pass, err)
		}
		if err := writeOverlay(st.Overlay, dir); err != nil {
			return fmt.Errorf("codegen pass %d: %w", pass, err)
		}
		if !st.NeedRegenerate {
			return nil
		}
	}
	return fmt.Errorf("codegen did not settle after %d passes", maxCodegenPass)
}

// quietly runs f with os.Stdout sent to stderr when verbose, else discarded:
// the generator's package loader prints its `go list` timings on stdout.
func quietly(verbose bool, f func() error) error {
	sink := os.Stderr
	if !verbose {
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer devnull.Close()
		sink = devnull
	}
	stdout := os.Stdout
	os.Stdout = sink
	defer func() { os.Stdout = stdout }()
	return f()
}

func writeOverlay(overlay fs.FS, dir string) error {
	return fs.WalkDir(overlay, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isGenerated(path) {
			if !d.IsDir() {
				slog.Info("ignoring generator output", "path", path)
			}
			return nil
		}
		b, err := fs.ReadFile(overlay, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
}

// isGenerated reports whether a slash-separated path relative to the module
// root is one of the files this tool owns.
func isGenerated(rel string) bool {
	return rel == genFile || (strings.HasPrefix(rel, genDir+"/") && strings.HasSuffix(rel, ".go"))
}

func goBuild(ctx context.Context, dir string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return nil
}

// collect reads the generated files under root, gofmt'd, keyed by
// slash-separated relative path.
func collect(root string) (map[string][]byte, error) {
	files := map[string][]byte{}
	add := func(rel string) error {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		files[rel] = b
		return nil
	}
	if err := add(genFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(genDir)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		rel := genDir + "/" + e.Name()
		if e.Type().IsRegular() && isGenerated(rel) {
			if err := add(rel); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

// diff lists, one line each, how have differs from want.
func diff(have, want map[string][]byte) []string {
	var out []string
	for _, rel := range sortedKeys(want) {
		h, ok := have[rel]
		switch {
		case !ok:
			out = append(out, "missing: "+rel)
		case !bytes.Equal(h, want[rel]):
			out = append(out, fmt.Sprintf("changed: %s (first difference at line %d)", rel, firstDiffLine(h, want[rel])))
		}
	}
	for _, rel := range sortedKeys(have) {
		if _, ok := want[rel]; !ok {
			out = append(out, "stale:   "+rel)
		}
	}
	return out
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(la) && i < len(lb); i++ {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// apply makes the generated files under root equal to fresh: writes what
// changed and removes generated files that are no longer produced.
func apply(root string, committed, fresh map[string][]byte) error {
	for _, rel := range sortedKeys(fresh) {
		b := fresh[rel]
		if old, ok := committed[rel]; ok && bytes.Equal(old, b) {
			continue
		}
		out := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return err
		}
	}
	for _, rel := range sortedKeys(committed) {
		if _, ok := fresh[rel]; !ok {
			if err := os.Remove(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
