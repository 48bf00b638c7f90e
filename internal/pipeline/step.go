package pipeline

import (
	"context"
	"fmt"
	"strings"
)

// Step is one command a function runs in its container.
type Step struct {
	// Name is what reports call the step, e.g. "go vet".
	Name string
	// Args is the command line.
	Args []string
	// Privileged asks for the container's full root capabilities (Dagger's
	// InsecureRootCapabilities): needed where tests run debootstrap.
	Privileged bool
	// FailOnOutput makes the step fail when it prints anything on stdout
	// even if it exits 0 (gofmt -l lists files and exits 0).
	FailOnOutput bool
}

// Outcome is what running a step produced.
type Outcome struct {
	Step     Step
	ExitCode int
	Stdout   string
	Stderr   string
}

// StepError is a failed step, with its exit code and output.
type StepError struct {
	Step     string
	ExitCode int
	// Output is the step's stdout then stderr.
	Output string
	// Reason says why a step that exited 0 still failed; empty otherwise.
	Reason string
}

func (e *StepError) Error() string {
	var b strings.Builder
	if e.Reason != "" {
		fmt.Fprintf(&b, "%s failed: %s", e.Step, e.Reason)
	} else {
		fmt.Fprintf(&b, "%s failed (exit code %d)", e.Step, e.ExitCode)
	}
	if out := strings.TrimRight(e.Output, "\n"); out != "" {
		b.WriteString(":\n")
		b.WriteString(out)
	}
	return b.String()
}

// Check returns the StepError an outcome amounts to, or nil.
func Check(o Outcome) error {
	output := o.Stdout
	if o.Stderr != "" {
		if output != "" && !strings.HasSuffix(output, "\n") {
			output += "\n"
		}
		output += o.Stderr
	}
	if o.ExitCode != 0 {
		return &StepError{Step: o.Step.Name, ExitCode: o.ExitCode, Output: output}
	}
	if o.Step.FailOnOutput && strings.TrimSpace(o.Stdout) != "" {
		return &StepError{Step: o.Step.Name, Output: output, Reason: "it reported problems"}
	}
	return nil
}

// Executor runs one step; in the module it is a Dagger container that each
// step extends. Exec returns an error only when the step could not be run at
// all (engine trouble), not when the command failed.
type Executor interface {
	Exec(ctx context.Context, step Step) (Outcome, error)
}

// Run runs steps in order and stops at the first failure. On success it
// returns a report of every step's output; on failure the error is a
// *StepError carrying the failed step's output, so that `dagger call` shows
// it.
func Run(ctx context.Context, steps []Step, x Executor) (string, error) {
	var report strings.Builder
	for _, step := range steps {
		o, err := x.Exec(ctx, step)
		if err != nil {
			return report.String(), fmt.Errorf("%s: %w", step.Name, err)
		}
		if err := Check(o); err != nil {
			return report.String(), err
		}
		fmt.Fprintf(&report, "== %s: ok\n", step.Name)
		for _, s := range []string{o.Stdout, o.Stderr} {
			if s = strings.TrimRight(s, "\n"); s != "" {
				report.WriteString(s)
				report.WriteString("\n")
			}
		}
	}
	return report.String(), nil
}
