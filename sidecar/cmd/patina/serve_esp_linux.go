//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// espProbeArgs add the kind of IPsec state Docker's encrypted overlay
// networks use (ESP, transport mode, AES-GCM as rfc4106): a kernel without
// ESP, or without that cipher, refuses it as it refuses Docker's own
// ("Failed adding rSA … function not implemented" in the node's daemon
// log, while the workspace's create waits and fails much later).
var espProbeArgs = []string{"xfrm", "state", "add", "src", "192.0.0.170", "dst", "192.0.0.171",
	"proto", "esp", "spi", "0x100", "reqid", "1", "mode", "transport",
	"aead", "rfc4106(gcm(aes))", "0x0102030405060708090a0b0c0d0e0f1011121314", "64"}

// errESPUnchecked: the probe could not run here (not root, no ip).
var errESPUnchecked = errors.New("could not check for IPsec ESP")

// checkESP runs the probe with iproute2's ip in a network namespace of its
// own, which goes with it: nothing of the host's changes. It needs root.
func checkESP(ctx context.Context) error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("%w: no ip command (iproute2): %v", errESPUnchecked, err)
	}
	ctx, cancel := context.WithTimeout(ctx, espCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ip, espProbeArgs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ee):
		return fmt.Errorf("%w: %v", errESPUnchecked, err) // e.g. EPERM: not root
	}
	return fmt.Errorf("this kernel cannot encrypt the workspaces' overlay networks (IPsec ESP with AES-GCM: %s), "+
		"so no workspace would start on another node. Load ESP on every node (modprobe esp4; a kernel built "+
		"without it cannot), or start with --swarm-unencrypted (the workspaces' traffic between nodes then "+
		"crosses your network in the clear)", strings.TrimSpace(string(out)))
}
