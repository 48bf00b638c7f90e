package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	vet := Step{Name: "go vet", Args: []string{"go", "vet", "./..."}}
	fmtStep := Step{Name: "gofmt", Args: []string{"gofmt", "-l", "."}, FailOnOutput: true}
	for _, tc := range []struct {
		name    string
		o       Outcome
		failed  bool
		code    int
		output  string
		message string
	}{
		{name: "success", o: Outcome{Step: vet, Stdout: "", Stderr: ""}},
		{name: "success with stderr", o: Outcome{Step: fmtStep, Stderr: "warning\n"}},
		{name: "exit code", o: Outcome{Step: vet, ExitCode: 1, Stdout: "a\n", Stderr: "b.go:1: bad\n"},
			failed: true, code: 1, output: "a\nb.go:1: bad\n", message: "go vet failed (exit code 1):\na\nb.go:1: bad"},
		{name: "missing newline joined", o: Outcome{Step: vet, ExitCode: 2, Stdout: "a", Stderr: "b"},
			failed: true, code: 2, output: "a\nb", message: "go vet failed (exit code 2):\na\nb"},
		{name: "output fails", o: Outcome{Step: fmtStep, Stdout: "main.go\n"},
			failed: true, output: "main.go\n", message: "gofmt failed: it reported problems:\nmain.go"},
		{name: "no output", o: Outcome{Step: vet, ExitCode: 3},
			failed: true, code: 3, message: "go vet failed (exit code 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.o)
			if !tc.failed {
				if err != nil {
					t.Fatalf("exp nil, got %v", err)
				}
				return
			}
			var se *StepError
			if !errors.As(err, &se) {
				t.Fatalf("exp *StepError, got %T %v", err, err)
			}
			if se.ExitCode != tc.code || se.Output != tc.output {
				t.Errorf("exp code %d output %q, got %d %q", tc.code, tc.output, se.ExitCode, se.Output)
			}
			if err.Error() != tc.message {
				t.Errorf("message: exp %q, got %q", tc.message, err.Error())
			}
		})
	}
}

// fakeExecutor returns canned outcomes by step name and records the calls.
type fakeExecutor struct {
	outcomes map[string]Outcome
	fail     map[string]error
	ran      []string
}

func (f *fakeExecutor) Exec(_ context.Context, s Step) (Outcome, error) {
	f.ran = append(f.ran, s.Name)
	if err := f.fail[s.Name]; err != nil {
		return Outcome{}, err
	}
	o := f.outcomes[s.Name]
	o.Step = s
	return o, nil
}

func TestRun(t *testing.T) {
	steps := []Step{{Name: "one"}, {Name: "two"}, {Name: "three"}}

	t.Run("all pass", func(t *testing.T) {
		x := &fakeExecutor{outcomes: map[string]Outcome{"one": {Stdout: "hello\n"}, "three": {Stderr: "note"}}}
		got, err := Run(context.Background(), steps, x)
		if err != nil {
			t.Fatal(err)
		}
		exp := "== one: ok\nhello\n== two: ok\n== three: ok\nnote\n"
		if got != exp {
			t.Errorf("exp %q, got %q", exp, got)
		}
	})

	t.Run("stops at first failure with its output", func(t *testing.T) {
		x := &fakeExecutor{outcomes: map[string]Outcome{"two": {ExitCode: 1, Stdout: "--- FAIL: TestX\n"}}}
		report, err := Run(context.Background(), steps, x)
		var se *StepError
		if !errors.As(err, &se) || se.Step != "two" || !strings.Contains(err.Error(), "--- FAIL: TestX") {
			t.Fatalf("exp a StepError for two with the output, got %v", err)
		}
		if exp := []string{"one", "two"}; !slices.Equal(exp, x.ran) {
			t.Errorf("ran: exp %v, got %v", exp, x.ran)
		}
		if report != "== one: ok\n" {
			t.Errorf("report: got %q", report)
		}
	})

	t.Run("engine error", func(t *testing.T) {
		boom := errors.New("connection refused")
		x := &fakeExecutor{fail: map[string]error{"one": boom}}
		_, err := Run(context.Background(), steps, x)
		if !errors.Is(err, boom) {
			t.Fatalf("exp the engine error wrapped, got %v", err)
		}
		var se *StepError
		if errors.As(err, &se) {
			t.Error("an engine error is not a StepError")
		}
	})
}
