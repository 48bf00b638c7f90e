package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/tests"
)

// TestSwarmServeChecksESP starts `patina serve --engine swarm` with
// encrypted overlays on a kernel without IPsec ESP (this machine kind has
// none): it must refuse at once, saying what to do, instead of starting
// and letting every workspace on another node wait 120 s and fail with a
// 500. Where the kernel has ESP there is nothing to show.
func TestSwarmServeChecksESP(t *testing.T) {
	skipUnlessRoot(t, "needs root and iproute2 (skipped with -short)",
		"the ESP check needs root (a network namespace of its own)")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := checkESP(ctx)
	switch {
	case err == nil:
		t.Skip("this kernel has IPsec ESP with AES-GCM: encrypted overlays work here, nothing to refuse")
	case errors.Is(err, errESPUnchecked):
		t.Fatalf("the check could not run as root: %v", err)
	}
	bin := tests.Binary(t)
	cmd := exec.CommandContext(ctx, bin, "serve", "--engine", "swarm", "--addr", "127.0.0.1:0", "--state-dir", t.TempDir())
	cmd.Env = cleanEnviron()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	runErr := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(runErr, &ee) {
		t.Fatalf("exp serve to exit with an error, got %v\n%s", runErr, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{"IPsec ESP", "--swarm-unencrypted", "modprobe esp4"} {
		if !strings.Contains(msg, want) {
			t.Errorf("exp %q in serve's message, got %q", want, msg)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the refusal took %s", d)
	}
}
