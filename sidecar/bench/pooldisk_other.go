//go:build !linux

package bench

// poolUsedBytes: disk pools are Linux's only.
func poolUsedBytes(string) (int64, bool) { return 0, false }

// settle: nothing to settle.
func settle() {}
