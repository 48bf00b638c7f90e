package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// SlimAgentName is the in-container program alone
// (./sidecar/cmd/patina-agent): a sidecar on Linux ships it when it finds
// it beside its own executable (`go install ./sidecar/cmd/...` puts it
// there) and it speaks this sidecar's protocol.
const SlimAgentName = "patina-agent"

// slimAgentTimeout bounds asking patina-agent its protocol.
const slimAgentTimeout = 5 * time.Second

// defaultAgentBinary is the binary the workspaces' agent runs from when
// none is named. On Linux: patina-agent beside this executable when it
// answers with this sidecar's protocol (why says why one beside it was
// passed over), else this executable. Elsewhere (a sidecar on macOS,
// against Docker Desktop, whose Linux VM has the Mac's architecture)
// patina-linux-<goarch> beside it, built by the user:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -o patina-linux-arm64 ./sidecar/cmd/patina
//
// It is never downloaded.
func defaultAgentBinary(ctx context.Context, goos, goarch, exe, version string) (bin string, why error, err error) {
	if goos == "linux" {
		slim, err := SlimAgentBeside(ctx, exe, version)
		if err == nil {
			return slim, nil, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return exe, err, nil
	}
	p := filepath.Join(filepath.Dir(exe), "patina-linux-"+goarch)
	if _, err := os.Stat(p); err != nil {
		return "", nil, fmt.Errorf("the workspaces' agent is a Linux program, and on %s patina looks for it at %s (%v): build it with `CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./sidecar/cmd/patina`, or name one with --agent-binary", goos, p, err, goarch, p)
	}
	return p, nil, nil
}

// SlimAgentBeside is patina-agent beside exe, if it is there (else an
// error matching fs.ErrNotExist), runs, speaks this sidecar's protocol and
// is of its release (`patina-agent agent version`; version "" or "dev", on
// either side, is not compared); otherwise an error saying why not.
func SlimAgentBeside(ctx context.Context, exe, version string) (string, error) {
	p := filepath.Join(filepath.Dir(exe), SlimAgentName)
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	ctx, cancel := context.WithTimeout(ctx, slimAgentTimeout)
	defer cancel()
	out, errOut := &boundedLog{max: 256}, &boundedLog{max: 512}
	cmd := exec.CommandContext(ctx, p, "agent", "version")
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s agent version: %w: %s (an older patina-agent has no version command: rebuild it with this patina)", p, err, strings.TrimSpace(errOut.buf.String()))
	}
	// patina-agent VERSION protocol N
	f := strings.Fields(out.buf.String())
	if len(f) != 4 || f[0] != SlimAgentName || f[2] != "protocol" {
		return "", fmt.Errorf("%s agent version answered %q, not patina-agent's", p, out.buf.String())
	}
	if n, err := strconv.Atoi(f[3]); err != nil || n != wire.ProtocolVersion {
		return "", fmt.Errorf("%s (version %s) speaks protocol %s, this sidecar %d: rebuild it with this patina", p, f[1], f[3], wire.ProtocolVersion)
	}
	if dev := func(v string) bool { return v == "" || v == "dev" }; !dev(version) && !dev(f[1]) && f[1] != version {
		return "", fmt.Errorf("%s is version %s, this sidecar %s: install the patina-agent of this release beside it", p, f[1], version)
	}
	return p, nil
}
