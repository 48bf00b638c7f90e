package inside

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Errors of CheckBinary.
var (
	// ErrBinaryMissing: no regular file at the path.
	ErrBinaryMissing = errors.New("no patina binary there")
	// ErrBinaryDiffers: a file whose sha256 is not the one asked for.
	ErrBinaryDiffers = errors.New("not the expected patina binary")
)

// CheckBinary reports whether path is a regular file whose sha256 is
// wantHex. The sidecar runs it on a cluster node, from an image of its own
// making that holds its own binary, to check the node's --node-binary
// before a workspace runs from it (container.Swarm): the node's copy is
// only read, never run.
func CheckBinary(path, wantHex string) error {
	want, err := hex.DecodeString(wantHex)
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("--sha256 must be 64 hex digits, not %q", wantHex)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBinaryMissing, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBinaryMissing, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is a %s, not a regular file", ErrBinaryMissing, path, fi.Mode().Type())
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if got := h.Sum(nil); hex.EncodeToString(got) != hex.EncodeToString(want) {
		return fmt.Errorf("%w: %s has sha256 %x, not %s", ErrBinaryDiffers, path, got, wantHex)
	}
	return nil
}
