package pipeline

// LintSteps returns what Lint runs, in order: gofmt (fails listing the
// files that need it), go vet, and the check that the committed Dagger
// generated code is what hack/daggergen produces.
func LintSteps() []Step {
	return []Step{
		{Name: "gofmt", Args: []string{"gofmt", "-l", "."}, FailOnOutput: true},
		{Name: "go vet", Args: []string{"go", "vet", "./..."}},
		{Name: "generated code", Args: []string{"go", "-C", "hack/daggergen", "run", ".", "-check"}},
	}
}
