package template

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; check them with errors.Is.
var (
	// ErrInvalid: a devcontainer.json, Dockerfile path or template name
	// that cannot be used.
	ErrInvalid = errors.New("invalid template")
	// ErrNotFound: no template of that name.
	ErrNotFound = errors.New("template not found")
	// ErrBuild: the build or a create command failed (a *BuildError says
	// how).
	ErrBuild = errors.New("template build failed")
	// ErrInUse: a workspace's container still uses the template's image.
	ErrInUse = errors.New("template in use")
	// ErrExists: a template of that name exists (a snapshot does not
	// replace it).
	ErrExists = errors.New("template exists")
	// ErrTooLarge: a workspace holds more than a snapshot may save.
	ErrTooLarge = errors.New("workspace too large to save")
)

// BuildError is a failed build or create command, with its last lines of
// output.
type BuildError struct {
	Step string   // "build" or "create commands"
	Err  string   // what failed
	Tail []string // the last lines of its output
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Step, e.Err)
	if len(e.Tail) > 0 {
		b.WriteString("; last lines:\n")
		b.WriteString(strings.Join(e.Tail, "\n"))
	}
	return b.String()
}

func (e *BuildError) Unwrap() error { return ErrBuild }
