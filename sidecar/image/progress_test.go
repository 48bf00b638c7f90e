package image

import (
	"strings"
	"testing"
)

// debootstrapLog is the shape of debootstrap --variant=minbase's output
// (shortened: three packages where there are about a hundred).
const debootstrapLog = `==> building patina/base:bookworm: debootstrap bookworm (minbase + git) from http://mirror/debian into /tmp/x
I: Retrieving InRelease 
I: Checking Release signature
I: Valid Release signature (key id 4D64FEC119C2029067D6E791F8D2585B8783D481)
I: Retrieving Packages 
I: Validating Packages 
I: Resolving dependencies of required packages...
I: Resolving dependencies of base packages...
I: Checking component main on http://mirror/debian...
I: Retrieving adduser 3.134
I: Validating adduser 3.134
I: Retrieving apt 2.6.1
I: Validating apt 2.6.1
I: Retrieving git 1:2.39.5-0+deb12u2
I: Validating git 1:2.39.5-0+deb12u2
W: an odd warning
I: Extracting adduser...
I: Extracting apt...
I: Installing required packages...
I: Unpacking required packages...
I: Unpacking adduser...
I: Configuring required packages...
I: Configuring adduser...
Setting up adduser (3.134) ...
I: Configuring apt...
I: Base system installed successfully.
==> importing patina/base:bookworm into Docker
`

func TestProgressLine(t *testing.T) {
	t.Run("not a terminal: one line per phase", func(t *testing.T) {
		var b strings.Builder
		w := NewProgressLine(&b, false)
		for _, chunk := range strings.SplitAfter(debootstrapLog, "a") { // lines split across writes
			w.Write([]byte(chunk))
		}
		w.Close()
		exp := `==> building patina/base:bookworm: debootstrap bookworm (minbase + git) from http://mirror/debian into /tmp/x
==> debootstrap: downloading
W: an odd warning
==> debootstrap: unpacking
==> debootstrap: configuring
==> importing patina/base:bookworm into Docker
`
		if got := b.String(); got != exp {
			t.Errorf("exp\n%s\ngot\n%s", exp, got)
		}
	})
	t.Run("terminal: one line rewritten", func(t *testing.T) {
		var b strings.Builder
		w := NewProgressLine(&b, true)
		w.Write([]byte(debootstrapLog))
		w.Close()
		got := b.String()
		// building, the rewritten line up to the warning, the warning, the
		// rewritten line again, importing.
		if lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n"); len(lines) != 5 {
			t.Fatalf("exp 5 lines, got %d:\n%q", len(lines), got)
		}
		for _, want := range []string{"downloading (3 packages)\nW: ", "unpacking (3 packages)", "configuring (2 packages)\n==> importing"} {
			if !strings.Contains(got, "\r\033[K==> debootstrap: "+want) {
				t.Errorf("exp %q, got %q", want, got)
			}
		}
		if strings.Contains(got, "downloading (4") {
			t.Errorf("exp counts per phase rewritten in place, got %q", got)
		}
		if strings.Contains(got, "Setting up") || strings.Contains(got, "I: ") {
			t.Errorf("raw debootstrap output shown: %q", got)
		}
	})
}
