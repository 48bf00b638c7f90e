// Package mountinfo reads /proc/self/mountinfo: whether a directory is a
// mount point, with which options and of which file system. It is the one
// parser of that file in patina.
package mountinfo

import (
	"bufio"
	"io"
	"strings"
)

// Mount is one line of mountinfo.
type Mount struct {
	// Point is where it is mounted; Root is the directory of its file
	// system that is mounted there ("/" unless it is a bind of a subtree).
	Point, Root string
	// Options are the per-mount options ("rw,nosuid,nodev,relatime").
	Options string
	// FSType and Source are the file system's type and source (a device, an
	// image's loop device, "overlay").
	FSType, Source string
}

// HasOption reports whether the mount has the per-mount option opt.
func (m Mount) HasOption(opt string) bool {
	for _, o := range strings.Split(m.Options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// parse reads mountinfo lines. A line it cannot read is skipped.
func parse(r io.Reader, keep func(Mount) bool) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 {
			continue
		}
		m := Mount{
			Root:    unescape(fields[3]),
			Point:   unescape(fields[4]),
			Options: fields[5],
			FSType:  fields[sep+1],
			Source:  unescape(fields[sep+2]),
		}
		if keep(m) {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
