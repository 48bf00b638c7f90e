package pipeline

import (
	"slices"
	"testing"
)

func TestLintSteps(t *testing.T) {
	steps := LintSteps()
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	if exp := []string{"gofmt", "go vet", "generated code"}; !slices.Equal(exp, names) {
		t.Fatalf("exp %v, got %v", exp, names)
	}
	if !steps[0].FailOnOutput {
		t.Error("gofmt -l exits 0 when files need formatting: exp FailOnOutput")
	}
	if exp := []string{"go", "-C", "hack/daggergen", "run", ".", "-check"}; !slices.Equal(exp, steps[2].Args) {
		t.Errorf("generated code: exp %q, got %q", exp, steps[2].Args)
	}
}
