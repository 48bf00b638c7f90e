package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Where Debian installs xterm.js. Its browser bundle in libjs-xterm
// (/usr/share/javascript/xterm/xterm.js) is a stub that needs a CommonJS
// loader, so the console takes the modules of node-xterm and joins them
// into one script itself (no bundler, no network); the stylesheet and the
// fit addon come from libjs-xterm.
const (
	DefaultXtermLib = "/usr/share/nodejs/xterm/lib"
	DefaultXtermCSS = "/usr/share/javascript/xterm/xterm.css"
	DefaultXtermFit = "/usr/share/javascript/xterm/addons/fit/fit.js"
	// maxXtermBytes bounds what is read from those directories (xterm 3.8
	// is about 370 KB).
	maxXtermBytes = 8 << 20
	// XtermPackages names what to install when xterm.js is absent.
	XtermPackages = "node-xterm libjs-xterm"
)

// ErrNoXterm says xterm.js is not installed.
var ErrNoXterm = errors.New("xterm.js is not installed on the sidecar's machine (apt-get install " + XtermPackages + ")")

// xterm builds, once it succeeds, the script that defines window.Terminal.
type xterm struct {
	lib, css, fit string

	mu     sync.Mutex
	script []byte
}

// js returns the joined script (built on first success; a failure is
// tried again on the next request, so installing the package later works).
func (x *xterm) js() ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.script != nil {
		return x.script, nil
	}
	b, err := bundle(x.lib, x.fit)
	if err != nil {
		return nil, err
	}
	x.script = b
	return b, nil
}

// stylesheet reads xterm.css.
func (x *xterm) stylesheet() ([]byte, error) {
	b, err := os.ReadFile(x.css)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoXterm, err)
	}
	return b, nil
}

// loader is the CommonJS require that the joined modules run under: ids are
// paths relative to lib without ".js"; only relative requires exist in
// xterm 3.8's lib.
const loader = `
function resolve(from, p) {
  var parts = from.split("/"); parts.pop();
  p.replace(/\.js$/, "").split("/").forEach(function (s) {
    if (s === "..") parts.pop(); else if (s !== ".") parts.push(s);
  });
  return parts.join("/");
}
function load(id) {
  if (cache[id]) return cache[id].exports;
  if (!defs[id]) throw new Error("xterm module missing: " + id);
  var m = cache[id] = {exports: {}};
  defs[id].call(m.exports, m.exports, function (p) { return load(resolve(id, p)); }, m);
  return m.exports;
}
var T = load("public/Terminal").Terminal;
if (defs["addons/fit"]) T.applyAddon(load("addons/fit"));
window.Terminal = T;
`

// bundle joins lib's modules (tests left out) and the fit addon into one
// script.
func bundle(lib, fit string) ([]byte, error) {
	var ids []string
	src := map[string][]byte{}
	total := 0
	add := func(id, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if total += len(b); total > maxXtermBytes {
			return fmt.Errorf("%s holds more than %d bytes of script", lib, maxXtermBytes)
		}
		ids = append(ids, id)
		src[id] = b
		return nil
	}
	err := filepath.WalkDir(lib, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".js") || strings.HasSuffix(path, ".test.js") || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(lib, path)
		return add(strings.TrimSuffix(filepath.ToSlash(rel), ".js"), path)
	})
	if err == nil && src["public/Terminal"] == nil {
		err = errors.New("no public/Terminal.js")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoXterm, err)
	}
	if fit != "" {
		_ = add("addons/fit", fit) // optional: without it the terminal keeps 80x24
	}
	sort.Strings(ids)
	var out bytes.Buffer
	out.WriteString("// xterm.js from Debian's node-xterm (" + lib + "), joined by patina.\n(function () {\nvar defs = {}, cache = {};\n")
	for _, id := range ids {
		q, _ := json.Marshal(id)
		fmt.Fprintf(&out, "defs[%s] = function (exports, require, module) {\n", q)
		for _, line := range strings.Split(string(src[id]), "\n") {
			if strings.HasPrefix(line, "//# sourceMappingURL=") {
				continue
			}
			out.WriteString(line)
			out.WriteByte('\n')
		}
		out.WriteString("};\n")
	}
	out.WriteString(loader)
	out.WriteString("})();\n")
	return out.Bytes(), nil
}
