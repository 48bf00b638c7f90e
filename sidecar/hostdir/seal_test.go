package hostdir

import (
	"errors"
	"os"
	"testing"
)

func TestSeal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	if err := Seal(dir); err != nil {
		if testing.Short() && errors.Is(err, ErrCannotSeal) {
			t.Skipf("mounting is not permitted here (no CAP_SYS_ADMIN): %v", err)
		}
		t.Fatal(err)
	}
	defer Unseal(dir)
	if !Sealed(dir) {
		t.Fatal("not sealed after Seal")
	}
	if err := Seal(dir); err != nil {
		t.Fatalf("seal twice: %v", err)
	}
	if err := Unseal(dir); err != nil || Sealed(dir) {
		t.Fatalf("unseal: %v", err)
	}
}
