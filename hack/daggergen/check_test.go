package main

import (
	"bytes"
	"context"
	"testing"
)

// TestCommittedCodeIsCurrent regenerates the root module's code twice from
// scratch and requires both results to equal the committed files: the
// committed code is current and generation is deterministic.
func TestCommittedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerates the Dagger code twice (~20 s)")
	}
	for i := range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), options{root: "../..", check: true}, &out); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out.String())
		}
	}
}
