package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Where a repository keeps its devcontainer.json, in the order looked at.
var ConfigPaths = []string{".devcontainer/devcontainer.json", ".devcontainer.json"}

// Bounds on what a repository gives.
const (
	MaxConfigBytes  = 1 << 20 // devcontainer.json
	MaxCommands     = 64      // commands in one create-command object
	MaxEnv          = 256     // containerEnv + remoteEnv entries
	MaxForwardPorts = 64
)

// Devcontainer is what patina takes from a devcontainer.json
// (https://containers.dev/implementors/json_reference/).
type Devcontainer struct {
	Image           string
	Dockerfile      string // repository-relative, "" with Image
	Context         string // repository-relative directory ("" is the root)
	Args            map[string]string
	Target          string
	Env             map[string]string // containerEnv, then remoteEnv over it
	WorkspaceFolder string
	Commands        []string // onCreate, updateContent, postCreate: each a shell command line
	ForwardPorts    []int
	// Ignored lists the properties present that patina does not apply.
	Ignored []string
}

// refused are properties patina cannot honour and will not pretend to:
// a create asking for them fails with the reason.
var refused = map[string]string{
	"dockerComposeFile": "Docker Compose devcontainers are not supported: give an image or a build",
	"features":          "devcontainer features are not supported (they are fetched from registries): install what they would in the Dockerfile",
}

// known are the properties applied.
var known = map[string]bool{
	"name": true, "image": true, "build": true, "dockerFile": true, "context": true,
	"containerEnv": true, "remoteEnv": true, "workspaceFolder": true,
	"onCreateCommand": true, "updateContentCommand": true, "postCreateCommand": true,
	"forwardPorts": true, "$schema": true,
}

type rawConfig struct {
	Image      string `json:"image"`
	DockerFile string `json:"dockerFile"` // the old top-level spelling
	Context    string `json:"context"`
	Build      *struct {
		Dockerfile string            `json:"dockerfile"`
		Context    string            `json:"context"`
		Args       map[string]string `json:"args"`
		Target     string            `json:"target"`
	} `json:"build"`
	ContainerEnv    map[string]string  `json:"containerEnv"`
	RemoteEnv       map[string]*string `json:"remoteEnv"`
	WorkspaceFolder string             `json:"workspaceFolder"`
	OnCreate        json.RawMessage    `json:"onCreateCommand"`
	UpdateContent   json.RawMessage    `json:"updateContentCommand"`
	PostCreate      json.RawMessage    `json:"postCreateCommand"`
	ForwardPorts    []json.RawMessage  `json:"forwardPorts"`
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// folderRE: an absolute path of plain characters (it becomes a
	// symlink to /workspace).
	folderRE = regexp.MustCompile(`^/[A-Za-z0-9._/-]+$`)
)

// ParseDevcontainer reads a devcontainer.json found at file (repository-relative:
// its paths are relative to its directory). Comments and trailing commas
// are allowed, as in the specification.
func ParseDevcontainer(file string, data []byte) (Devcontainer, error) {
	if len(data) > MaxConfigBytes {
		return Devcontainer{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, file, MaxConfigBytes)
	}
	clean := stripJSONC(data)
	var all map[string]json.RawMessage
	if err := json.Unmarshal(clean, &all); err != nil {
		return Devcontainer{}, fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
	}
	var c Devcontainer
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if why, ok := refused[k]; ok {
			return Devcontainer{}, fmt.Errorf("%w: %s: %s", ErrInvalid, file, why)
		}
		if !known[k] {
			c.Ignored = append(c.Ignored, k)
		}
	}
	var raw rawConfig
	if err := json.Unmarshal(clean, &raw); err != nil {
		return Devcontainer{}, fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
	}
	dir := path.Dir(file)
	rel := func(field, p string) (string, error) {
		if strings.ContainsRune(p, 0) || path.IsAbs(p) {
			return "", fmt.Errorf("%w: %s: %s %q must be a path relative to %s", ErrInvalid, file, field, p, file)
		}
		j := path.Join(dir, p)
		if j == ".." || strings.HasPrefix(j, "../") {
			return "", fmt.Errorf("%w: %s: %s %q leaves the repository", ErrInvalid, file, field, p)
		}
		if j == "." {
			j = ""
		}
		return j, nil
	}
	var err error
	c.Image = strings.TrimSpace(raw.Image)
	dockerfile, context := raw.DockerFile, raw.Context
	if raw.Build != nil {
		if raw.Build.Dockerfile != "" {
			dockerfile = raw.Build.Dockerfile
		}
		if raw.Build.Context != "" {
			context = raw.Build.Context
		}
		c.Args = raw.Build.Args
		c.Target = raw.Build.Target
	}
	switch {
	case dockerfile != "":
		if c.Dockerfile, err = rel("build.dockerfile", dockerfile); err != nil {
			return Devcontainer{}, err
		}
		if context == "" {
			context = "."
		}
		if c.Context, err = rel("build.context", context); err != nil {
			return Devcontainer{}, err
		}
		c.Image = ""
	case c.Image == "":
		return Devcontainer{}, fmt.Errorf("%w: %s names neither an image nor a build.dockerfile", ErrInvalid, file)
	}
	for k, v := range c.Args {
		if !envNameRE.MatchString(k) || strings.ContainsRune(v, 0) {
			return Devcontainer{}, fmt.Errorf("%w: %s: build arg %q", ErrInvalid, file, k)
		}
	}
	if len(raw.ContainerEnv)+len(raw.RemoteEnv) > MaxEnv {
		return Devcontainer{}, fmt.Errorf("%w: %s: more than %d environment variables", ErrInvalid, file, MaxEnv)
	}
	c.Env = map[string]string{}
	for k, v := range raw.ContainerEnv {
		c.Env[k] = v
	}
	for k, v := range raw.RemoteEnv {
		if v == nil { // null unsets
			delete(c.Env, k)
			continue
		}
		c.Env[k] = *v
	}
	for k, v := range c.Env {
		if !envNameRE.MatchString(k) || strings.ContainsRune(v, 0) {
			return Devcontainer{}, fmt.Errorf("%w: %s: environment variable %q", ErrInvalid, file, k)
		}
		c.Env[k] = substitute(v)
	}
	if f := raw.WorkspaceFolder; f != "" {
		f = path.Clean(f)
		if !folderRE.MatchString(f) || f == "/" || strings.HasPrefix(f, "/proc") || strings.HasPrefix(f, "/.patina") {
			return Devcontainer{}, fmt.Errorf("%w: %s: workspaceFolder %q must be an absolute path of letters, digits, '.', '_', '-' and '/'", ErrInvalid, file, raw.WorkspaceFolder)
		}
		c.WorkspaceFolder = f
	}
	for _, cmd := range []struct {
		name string
		raw  json.RawMessage
	}{{"onCreateCommand", raw.OnCreate}, {"updateContentCommand", raw.UpdateContent}, {"postCreateCommand", raw.PostCreate}} {
		lines, err := commandLines(cmd.raw)
		if err != nil {
			return Devcontainer{}, fmt.Errorf("%w: %s: %s: %v", ErrInvalid, file, cmd.name, err)
		}
		c.Commands = append(c.Commands, lines...)
	}
	if len(raw.ForwardPorts) > MaxForwardPorts {
		return Devcontainer{}, fmt.Errorf("%w: %s: more than %d forwardPorts", ErrInvalid, file, MaxForwardPorts)
	}
	for _, p := range raw.ForwardPorts {
		var n int
		if err := json.Unmarshal(p, &n); err != nil || n < 1 || n > 65535 {
			// "host:port" forwards to another container: not ours.
			return Devcontainer{}, fmt.Errorf("%w: %s: forwardPorts: %s is not a port number (1-65535)", ErrInvalid, file, p)
		}
		c.ForwardPorts = append(c.ForwardPorts, n)
	}
	return c, nil
}

// commandLines turns a lifecycle command (a string: a shell command line;
// an array: a command and its arguments; an object: several of either,
// run in the order of their names) into shell command lines.
func commandLines(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("a NUL byte")
		}
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		if len(argv) == 0 {
			return nil, nil
		}
		q := make([]string, len(argv))
		for i, a := range argv {
			if strings.ContainsRune(a, 0) {
				return nil, fmt.Errorf("a NUL byte")
			}
			q[i] = shellQuote(a)
		}
		return []string{strings.Join(q, " ")}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("want a string, an array of strings or an object of them")
	}
	if len(obj) > MaxCommands {
		return nil, fmt.Errorf("more than %d commands", MaxCommands)
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := bytes.TrimSpace(obj[k])
		if len(v) > 0 && v[0] == '{' {
			return nil, fmt.Errorf("%s: want a string or an array of strings", k)
		}
		lines, err := commandLines(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out = append(out, lines...)
	}
	return out, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// substitute replaces the specification's variables patina can answer
// (${containerWorkspaceFolder}); others are left as written.
func substitute(v string) string {
	return strings.ReplaceAll(v, "${containerWorkspaceFolder}", "/workspace")
}

// stripJSONC removes // and /* */ comments and trailing commas outside
// strings: what the specification's JSON with comments adds to JSON.
func stripJSONC(in []byte) []byte {
	out := make([]byte, 0, len(in))
	inStr, esc := false, false
	for i := 0; i < len(in); i++ {
		ch := in[i]
		if inStr {
			out = append(out, ch)
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inStr = false
			}
			continue
		}
		switch {
		case ch == '"':
			inStr = true
			out = append(out, ch)
		case ch == '/' && i+1 < len(in) && in[i+1] == '/':
			for i < len(in) && in[i] != '\n' {
				i++
			}
			if i < len(in) {
				out = append(out, '\n')
			}
		case ch == '/' && i+1 < len(in) && in[i+1] == '*':
			end := bytes.Index(in[i+2:], []byte("*/"))
			if end < 0 {
				return append(out, in[i:]...) // unterminated: let json say so
			}
			i += 2 + end + 1
			out = append(out, ' ')
		case ch == ']' || ch == '}':
			// Drop a comma that only whitespace separates from here.
			j := len(out) - 1
			for j >= 0 && (out[j] == ' ' || out[j] == '\t' || out[j] == '\n' || out[j] == '\r') {
				j--
			}
			if j >= 0 && out[j] == ',' {
				out = append(out[:j], out[j+1:]...)
			}
			out = append(out, ch)
		default:
			out = append(out, ch)
		}
	}
	return out
}

// portsString formats ports for a label.
func portsString(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}
