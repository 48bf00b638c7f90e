package inside

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "patina")
	if err := os.WriteFile(bin, []byte("the binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256([]byte("the binary"))
	sum := hex.EncodeToString(s[:])
	other := sha256.Sum256([]byte("another"))
	if err := os.Symlink(bin, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, sum string
		exp             error
	}{
		{"the binary", bin, sum, nil},
		{"another binary", bin, hex.EncodeToString(other[:]), ErrBinaryDiffers},
		{"missing", filepath.Join(dir, "none"), sum, ErrBinaryMissing},
		{"a directory", dir, sum, ErrBinaryMissing},
		{"a link is not followed", filepath.Join(dir, "link"), sum, ErrBinaryMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckBinary(tc.path, tc.sum); !errors.Is(err, tc.exp) || (tc.exp == nil) != (err == nil) {
				t.Fatalf("exp %v, got %v", tc.exp, err)
			}
		})
	}
	if err := CheckBinary(bin, "beef"); err == nil || errors.Is(err, ErrBinaryDiffers) {
		t.Fatalf("exp a bad --sha256 refused as such, got %v", err)
	}
}
