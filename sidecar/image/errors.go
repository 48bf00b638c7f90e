package image

import (
	"errors"
	"fmt"
	"strings"

	"github.com/patina-dev/patina/sidecar/engine"
)

var (
	// ErrMissing means an image is not present in the Docker engine and could
	// not be pulled. The wrapping error says how to build or load it.
	ErrMissing = engine.ErrImageMissing

	// ErrNoMirror means the apt configuration names no usable Debian mirror
	// for the wanted suite.
	ErrNoMirror = errors.New("no apt mirror")

	// ErrNotRoot means a build was asked for by a user other than root;
	// debootstrap needs root to chroot, chown and create device nodes.
	ErrNotRoot = errors.New("building an image needs root")

	// ErrNoDebootstrap means the debootstrap command is not installed.
	ErrNoDebootstrap = errors.New("debootstrap not found")

	// ErrInvalid means a request carried a tag, suite, package or mirror that
	// cannot be passed on safely.
	ErrInvalid = errors.New("invalid build request")
)

// CommandError is a subprocess (debootstrap) that exited unsuccessfully.
type CommandError struct {
	Args     []string // the command line
	ExitCode int      // -1 when it was killed by a signal
	Output   string   // the last lines of its combined stdout and stderr
	Log      string   // the last lines of its own log file, when it wrote one
}

func (e *CommandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s exited with status %d", e.Args[0], e.ExitCode)
	if out := strings.TrimSpace(e.Output); out != "" {
		fmt.Fprintf(&b, ":\n%s", out)
	}
	if log := strings.TrimSpace(e.Log); log != "" {
		fmt.Fprintf(&b, "\n--- end of its log:\n%s", log)
	}
	return b.String()
}
