package pollread

import (
	"os"
	"testing"
)

// These tests are of the polling itself, which is off by default.
func TestMain(m *testing.M) {
	SetEnabled(true)
	os.Exit(m.Run())
}
