package image

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
)

// source is one apt source: a one-line entry or a deb822 stanza.
type source struct {
	file          string // path as read
	line          int    // 1-based line of the entry or the stanza's first field
	types         []string
	uris          []string
	suites        []string
	components    []string
	architectures []string // empty: any
	excludedArchs []string // one-line "arch-=" option
	enabled       bool
}

// Mirror returns the URI of the first enabled "deb" source in the apt
// configuration under cfg.Root whose suites include suite exactly (so
// "bookworm" matches neither bookworm-updates nor bookworm-security), in the
// order apt reads it: etc/apt/sources.list, then etc/apt/sources.list.d/*.list
// and *.sources (deb822) sorted by name. Other file names (*.disabled,
// *.save ...) are ignored as apt ignores them. Sources restricted to other
// architectures are skipped, and so are URIs debootstrap cannot fetch from:
// only http, https, ftp and file (a local mirror whose dists/<suite> exists)
// qualify; cdrom:, copy:, mirror+... and the like do not. The result has no
// trailing slash. When nothing qualifies the error wraps ErrNoMirror.
func Mirror(cfg AptConfig, suite string) (string, error) {
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	srcs, err := readSources(root)
	if err != nil {
		return "", err
	}
	var unusable []string
	for _, s := range srcs {
		if !s.enabled || !slices.Contains(s.types, "deb") || !slices.Contains(s.suites, suite) || !s.forArch(debianArch()) {
			continue
		}
		for _, u := range s.uris {
			if usableURI(root, u, suite) {
				return strings.TrimRight(u, "/"), nil
			}
			unusable = append(unusable, fmt.Sprintf("%s (%s:%d)", u, s.file, s.line))
		}
	}
	where := filepath.Join(root, "etc/apt/sources.list") + " and " + filepath.Join(root, "etc/apt/sources.list.d")
	if len(unusable) > 0 {
		return "", fmt.Errorf("%w for suite %s in %s: debootstrap cannot use %s", ErrNoMirror, suite, where, strings.Join(unusable, ", "))
	}
	return "", fmt.Errorf("%w for suite %s in %s: no enabled deb source lists it", ErrNoMirror, suite, where)
}

// readSources reads every source apt would read under root, in apt's order.
func readSources(root string) ([]source, error) {
	var srcs []source
	main := filepath.Join(root, "etc/apt/sources.list")
	data, err := os.ReadFile(main)
	switch {
	case err == nil:
		srcs = append(srcs, parseList(main, data)...)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	dir := filepath.Join(root, "etc/apt/sources.list.d")
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read apt sources: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := e.Name()
		isList, isDeb822 := strings.HasSuffix(name, ".list"), strings.HasSuffix(name, ".sources")
		if e.IsDir() || (!isList && !isDeb822) || !aptFileName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read apt sources: %w", err)
		}
		if isList {
			srcs = append(srcs, parseList(path, data)...)
		} else {
			srcs = append(srcs, parseDeb822(path, data)...)
		}
	}
	return srcs, nil
}

// aptFileName reports whether apt would read a sources.list.d file of this
// name: apt skips names with characters other than letters, digits, '_', '-'
// and '.'.
func aptFileName(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// parseList parses the one-line format:
//
//	deb [ option=value ... ] uri suite [component ...]  # comment
//
// Lines it cannot make sense of are skipped.
func parseList(file string, data []byte) []source {
	var srcs []source
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			continue
		}
		typ, rest := line[:i], strings.TrimSpace(line[i:])
		s := source{file: file, line: n, types: []string{typ}, enabled: true}
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				continue
			}
			for _, opt := range strings.Fields(rest[1:end]) {
				key, val, ok := strings.Cut(opt, "=")
				if !ok {
					continue
				}
				vals := strings.Split(val, ",")
				switch key {
				case "arch":
					s.architectures = vals
				case "arch-":
					s.excludedArchs = vals
				}
			}
			rest = rest[end+1:]
		}
		f := quotedFields(rest)
		if len(f) < 2 {
			continue
		}
		s.uris, s.suites, s.components = f[:1], f[1:2], f[2:]
		srcs = append(srcs, s)
	}
	return srcs
}

// parseDeb822 parses the deb822 format of *.sources files: stanzas of
// "Field: value" lines separated by blank lines, values continued on lines
// that start with white space, '#' lines ignored, field names matched without
// regard to case. A stanza with "Enabled: no" is kept but disabled.
func parseDeb822(file string, data []byte) []source {
	var (
		srcs   []source
		fields map[string]string
		first  int
		last   string
	)
	flush := func() {
		if fields == nil {
			return
		}
		s := source{
			file:          file,
			line:          first,
			types:         strings.Fields(fields["types"]),
			uris:          quotedFields(fields["uris"]),
			suites:        strings.Fields(fields["suites"]),
			components:    strings.Fields(fields["components"]),
			architectures: strings.Fields(fields["architectures"]),
			enabled:       !strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no"),
		}
		if len(s.types) > 0 && len(s.uris) > 0 && len(s.suites) > 0 {
			srcs = append(srcs, s)
		}
		fields, last = nil, ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if fields != nil && last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			key, val, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if fields == nil {
				fields, first = map[string]string{}, n
			}
			last = strings.ToLower(strings.TrimSpace(key))
			fields[last] = strings.TrimSpace(val)
		}
	}
	flush()
	return srcs
}

// quotedFields splits s at white space as apt does: not inside [...] (as in
// "cdrom:[Debian GNU/Linux 12]/") nor inside "...", whose quotes it drops.
func quotedFields(s string) []string {
	var (
		out   []string
		cur   strings.Builder
		in    bool // inside a word
		close rune
	)
	for _, r := range s {
		switch {
		case close != 0:
			if r == close {
				close = 0
				if r == '"' {
					continue
				}
			}
		case r == '[':
			close = ']'
		case r == '"':
			close, in = '"', true
			continue
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
			continue
		}
		cur.WriteRune(r)
		in = true
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// forArch reports whether the source serves arch.
func (s source) forArch(arch string) bool {
	if slices.Contains(s.excludedArchs, arch) {
		return false
	}
	return len(s.architectures) == 0 || slices.Contains(s.architectures, arch)
}

// usableURI reports whether debootstrap can fetch suite from uri.
func usableURI(root, uri, suite string) bool {
	u, err := url.Parse(uri)
	if err != nil || strings.HasPrefix(uri, "-") {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ftp":
		return u.Host != ""
	case "file":
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return false
		}
		fi, err := os.Stat(filepath.Join(root, u.Path, "dists", suite))
		return err == nil && fi.IsDir()
	}
	return false
}

// debianArch is the Debian name of the architecture this binary runs on.
func debianArch() string {
	switch runtime.GOARCH {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	case "mips64le":
		return "mips64el"
	case "mipsle":
		return "mipsel"
	}
	return runtime.GOARCH // amd64, arm64, s390x, riscv64, loong64
}
