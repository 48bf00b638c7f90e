package mountinfo

import (
	"os"
	"path/filepath"
	"strings"
)

// path is the mount table read; tests leave it alone.
const path = "/proc/self/mountinfo"

// At returns the mount at dir (the last one mounted there: the one in
// effect), and whether there is one.
func At(dir string) (Mount, bool, error) {
	dir = filepath.Clean(dir)
	ms, err := read(func(m Mount) bool { return m.Point == dir })
	if err != nil || len(ms) == 0 {
		return Mount{}, false, err
	}
	return ms[len(ms)-1], true, nil
}

// Under returns the mounts at dir or below it, in mount order.
func Under(dir string) ([]Mount, error) {
	dir = filepath.Clean(dir)
	return read(func(m Mount) bool { return m.Point == dir || strings.HasPrefix(m.Point, dir+"/") })
}

func read(keep func(Mount) bool) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parse(f, keep)
}
