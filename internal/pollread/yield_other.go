//go:build !linux

package pollread

// pollSupported: elsewhere a Reader reads as os.File does (Expect does
// nothing).
const pollSupported = false

func yieldCPU() {}
