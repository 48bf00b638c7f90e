package container

import (
	"fmt"
	"os"
	"path/filepath"
)

// defaultAgentBinary is the patina binary the workspaces' agent runs from
// when none is named: this executable on Linux; elsewhere (a sidecar on
// macOS, against Docker Desktop, whose Linux VM has the Mac's
// architecture) patina-linux-<goarch> beside it, built by the user:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -o patina-linux-arm64 ./sidecar/cmd/patina
//
// It is never downloaded.
func defaultAgentBinary(goos, goarch, exe string) (string, error) {
	if goos == "linux" {
		return exe, nil
	}
	p := filepath.Join(filepath.Dir(exe), "patina-linux-"+goarch)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the workspaces' agent is a Linux program, and on %s patina looks for it at %s (%v): build it with `CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./sidecar/cmd/patina`, or name one with --agent-binary", goos, p, err, goarch, p)
	}
	return p, nil
}
