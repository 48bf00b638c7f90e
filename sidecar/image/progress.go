package image

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/patina-dev/patina/internal/lines"
)

// NewProgressLine returns a writer for a build's progress (BuildRequest.
// Progress) that shows debootstrap's hundreds of lines as its phases
// (downloading, unpacking, configuring) with a count of packages: on a
// terminal (tty) one line rewritten in place, otherwise one line per phase.
// patina's own "==> " lines and debootstrap's warnings and errors ("W:",
// "E:") are passed on whole. Close ends the rewritten line. This is the one
// place that reads debootstrap's output format.
func NewProgressLine(w io.Writer, tty bool) io.WriteCloser {
	return &progressLine{w: w, tty: tty}
}

type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	split lines.Splitter
	phase string
	count int
	open  bool // a rewritten line is on screen
}

func (p *progressLine) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.split.Feed(b, p.line)
	return len(b), nil
}

// phases maps debootstrap's "I: <Verb> …" lines to what the user is told.
var phases = map[string]string{
	"Retrieving":  "downloading",
	"Validating":  "downloading",
	"Checking":    "downloading",
	"Valid":       "downloading",
	"Resolving":   "downloading",
	"Found":       "downloading",
	"Extracting":  "unpacking",
	"Installing":  "unpacking",
	"Unpacking":   "unpacking",
	"Configuring": "configuring",
	"Base":        "configuring",
}

func (p *progressLine) line(line string) {
	if line == "" {
		return
	}
	msg, isInfo := strings.CutPrefix(line, "I: ")
	verb, _, _ := strings.Cut(msg, " ")
	phase, known := phases[verb]
	if !isInfo || !known {
		if strings.HasPrefix(line, "==> ") || strings.HasPrefix(line, "W: ") || strings.HasPrefix(line, "E: ") {
			p.endLine()
			fmt.Fprintln(p.w, line)
		}
		return // dpkg's chatter and the like: in debootstrap.log, and in an error's tail
	}
	if phase != p.phase {
		p.phase, p.count = phase, 0
		if !p.tty {
			fmt.Fprintf(p.w, "==> debootstrap: %s\n", phase)
		}
	}
	if !onePackage(verb, msg) {
		return
	}
	p.count++
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K==> debootstrap: %s (%d packages)", phase, p.count)
		p.open = true
	}
}

// onePackage reports whether an "I: " line is about one package ("I:
// Retrieving adduser 3.134", "I: Extracting apt...") rather than a step
// ("I: Retrieving Packages", "I: Unpacking required packages...", "I:
// Configuring the base system...").
func onePackage(verb, msg string) bool {
	switch verb {
	case "Retrieving", "Extracting", "Unpacking", "Configuring":
	default:
		return false
	}
	rest := strings.TrimSpace(strings.TrimPrefix(msg, verb))
	name, _, _ := strings.Cut(strings.TrimSuffix(rest, "..."), " ")
	switch {
	case name == "" || name == "InRelease" || name == "Release" || name == "Packages" || name == "the":
		return false
	case strings.HasSuffix(rest, "packages..."):
		return false
	}
	return true
}

func (p *progressLine) endLine() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

// Close ends a line left open on a terminal.
func (p *progressLine) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.split.Flush(p.line)
	p.endLine()
	return nil
}
