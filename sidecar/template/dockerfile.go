package template

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A small Dockerfile reader, enough to check what a build would fetch
// before the engine sees it. The classic builder fetches outside the
// build's "none" network: ADD of a URL is downloaded by dockerd itself, and
// a FROM or COPY --from image that is not local is pulled. So a Dockerfile
// is refused when it names a URL in ADD (also inside ONBUILD), uses a
// variable in FROM or --from (its value could name anything), or names an
// image that is not already on the engine.
//
// What it reads, as the classic builder does
// (https://docs.docker.com/reference/dockerfile/):
//   - parser directives (# escape=` or \) in the leading comment lines;
//   - comment lines (# first on the line), also inside a continuation;
//   - line continuations (the escape character last on a line), with empty
//     lines inside one skipped;
//   - instructions case-insensitively; ONBUILD's instruction checked as one;
//   - flags (--from=, --chown=, --platform= ...) before the arguments, and
//     the JSON form (["src", "dst"]) of ADD and COPY;
//   - FROM image [AS name]: later FROM and --from may name the stage.
// It needs no more: the engine parses the Dockerfile again and is the
// judge of everything else. Heredocs are BuildKit's; the classic builder
// refuses them.

// instruction is one Dockerfile instruction.
type instruction struct {
	line  int    // where it starts (1-based)
	cmd   string // upper case
	flags map[string]string
	args  []string // the words after the flags (the JSON form's strings)
	rest  string   // the text after the command (ONBUILD's instruction)
}

// parseDockerfile splits a Dockerfile into its instructions.
func parseDockerfile(data []byte) ([]instruction, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	escape := byte('\\')
	i := 0
	// Parser directives: leading "# key=value" comment lines.
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "#") {
			break
		}
		k, v, ok := strings.Cut(strings.TrimSpace(l[1:]), "=")
		if !ok || strings.ContainsAny(strings.TrimSpace(k), " \t") {
			break
		}
		if strings.EqualFold(strings.TrimSpace(k), "escape") {
			switch v = strings.TrimSpace(v); v {
			case "\\", "`":
				escape = v[0]
			default:
				return nil, fmt.Errorf("the escape directive %q: want ` or \\", v)
			}
		}
	}
	var out []instruction
	for i < len(lines) {
		l := strings.TrimSpace(lines[i])
		start := i + 1
		i++
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for len(l) > 0 && l[len(l)-1] == escape {
			b.WriteString(l[:len(l)-1])
			// The continuation: skip comment and empty lines.
			for i < len(lines) {
				t := strings.TrimSpace(lines[i])
				if t == "" || strings.HasPrefix(t, "#") {
					i++
					continue
				}
				break
			}
			if i >= len(lines) {
				l = ""
				break
			}
			l = strings.TrimSpace(lines[i])
			i++
		}
		b.WriteString(l)
		ins, err := parseInstruction(b.String(), start)
		if err != nil {
			return nil, err
		}
		out = append(out, ins)
	}
	return out, nil
}

// parseInstruction reads one joined instruction line.
func parseInstruction(s string, line int) (instruction, error) {
	s = strings.TrimSpace(s)
	cmd, rest, _ := strings.Cut(s, " ")
	if c, r, ok := strings.Cut(s, "\t"); ok && len(c) < len(cmd) {
		cmd, rest = c, r
	}
	ins := instruction{line: line, cmd: strings.ToUpper(cmd), rest: strings.TrimSpace(rest), flags: map[string]string{}}
	words := strings.Fields(ins.rest)
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		k, v, _ := strings.Cut(words[0][2:], "=")
		ins.flags[strings.ToLower(k)] = v
		words = words[1:]
	}
	args := strings.Join(words, " ")
	if strings.HasPrefix(args, "[") {
		var j []string
		if err := json.Unmarshal([]byte(args), &j); err == nil {
			ins.args = j
			return ins, nil
		}
	}
	ins.args = words
	return ins, nil
}

// DockerfileCheck is what a Dockerfile needs from the engine.
type DockerfileCheck struct {
	Images []string // FROM and --from images (not stages), in order, once each
	Run    bool     // it has RUN steps (ONBUILD's are not run by this build)
}

// CheckDockerfile refuses what would reach outside the build, and lists
// the images the build needs.
func CheckDockerfile(name string, data []byte) (DockerfileCheck, error) {
	inss, err := parseDockerfile(data)
	if err != nil {
		return DockerfileCheck{}, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	var c DockerfileCheck
	stages := map[string]bool{}
	seen := map[string]bool{}
	need := func(ref string) {
		if !seen[ref] {
			seen[ref] = true
			c.Images = append(c.Images, ref)
		}
	}
	at := func(ins instruction) string { return fmt.Sprintf("%s line %d", name, ins.line) }
	var check func(ins instruction, onbuild bool) error
	check = func(ins instruction, onbuild bool) error {
		switch ins.cmd {
		case "ONBUILD":
			if onbuild {
				return nil // the engine refuses ONBUILD ONBUILD
			}
			inner, err := parseInstruction(ins.rest, ins.line)
			if err != nil {
				return err
			}
			return check(inner, true)
		case "RUN":
			c.Run = c.Run || !onbuild
		case "FROM":
			if len(ins.args) == 0 {
				return fmt.Errorf("%w: %s: FROM names no image", ErrInvalid, at(ins))
			}
			ref := ins.args[0]
			if strings.Contains(ref, "$") {
				return fmt.Errorf("%w: %s: FROM %s: a variable in FROM is not allowed (templates are built from images already on the engine): name the image", ErrInvalid, at(ins), ref)
			}
			if !stages[strings.ToLower(ref)] && !strings.EqualFold(ref, "scratch") {
				need(ref)
			}
			if len(ins.args) >= 3 && strings.EqualFold(ins.args[1], "AS") {
				stages[strings.ToLower(ins.args[2])] = true
			}
		case "ADD", "COPY":
			if from, ok := ins.flags["from"]; ok && !onbuild {
				if strings.Contains(from, "$") {
					return fmt.Errorf("%w: %s: %s --from=%s: a variable in --from is not allowed: name the stage or image", ErrInvalid, at(ins), ins.cmd, from)
				}
				if _, err := strconv.Atoi(from); err != nil && !stages[strings.ToLower(from)] {
					need(from)
				}
			} else if ok && onbuild {
				return fmt.Errorf("%w: %s: ONBUILD %s --from is not allowed", ErrInvalid, at(ins), ins.cmd)
			}
			if ins.cmd == "ADD" {
				srcs := ins.args
				if len(srcs) > 1 {
					srcs = srcs[:len(srcs)-1]
				}
				for _, s := range srcs {
					if strings.Contains(s, "$") {
						return fmt.Errorf("%w: %s: ADD %s: a variable in an ADD source is not allowed (it could name a URL, which the engine would download outside the build's sandbox): name the file", ErrInvalid, at(ins), s)
					}
					if isRemote(s) {
						return fmt.Errorf("%w: %s: ADD %s: templates are built offline, and the engine would download it outside the build's sandbox: put the file in the repository, or fetch it in onCreateCommand", ErrInvalid, at(ins), s)
					}
				}
			}
		}
		return nil
	}
	for _, ins := range inss {
		if err := check(ins, false); err != nil {
			return DockerfileCheck{}, err
		}
	}
	if len(c.Images) == 0 && !hasFrom(inss) {
		return DockerfileCheck{}, fmt.Errorf("%w: %s has no FROM", ErrInvalid, name)
	}
	return c, nil
}

func hasFrom(inss []instruction) bool {
	for _, ins := range inss {
		if ins.cmd == "FROM" {
			return true
		}
	}
	return false
}

// isRemote says whether an ADD source is fetched rather than read from
// the context: a URL, or a git address.
func isRemote(s string) bool {
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@")
}
