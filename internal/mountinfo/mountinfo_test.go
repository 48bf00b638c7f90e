package mountinfo

import (
	"os"
	"strings"
	"testing"
)

const sample = `22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
36 22 7:0 / /var/lib/patina/disks/pool rw,relatime shared:20 - xfs /dev/loop0 rw,noquota
37 22 7:1 / /var/lib/patina/disks/mnt/ws\0401 rw,nosuid,nodev,relatime shared:21 - ext4 /dev/loop1 rw
38 22 7:1 /layer /var/lib/docker/x rw,nosuid,nodev shared:21 - ext4 /dev/loop1 rw
39 22 7:2 / /broken
40 22 0:5 / /opt/tagged rw shared:3 master:2 - tmpfs tmpfs rw
`

func TestParse(t *testing.T) {
	ms, err := parse(strings.NewReader(sample), func(Mount) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := 5, len(ms); exp != got {
		t.Fatalf("exp %d mounts, got %d: %+v", exp, got, ms)
	}
	m := ms[2]
	if exp, got := "/var/lib/patina/disks/mnt/ws 1", m.Point; exp != got {
		t.Errorf("exp point %q, got %q", exp, got)
	}
	if !m.HasOption("nosuid") || !m.HasOption("nodev") || m.HasOption("nosu") {
		t.Errorf("options of %+v", m)
	}
	if exp, got := "ext4", m.FSType; exp != got {
		t.Errorf("exp type %q, got %q", exp, got)
	}
	if exp, got := "/layer", ms[3].Root; exp != got {
		t.Errorf("exp root %q, got %q", exp, got)
	}
	if exp, got := "tmpfs", ms[4].FSType; exp != got {
		t.Errorf("optional fields: exp type %q, got %q", exp, got)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/x\134y`: `/x\y`, `/bad\04`: `/bad\04`} {
		if got := unescape(in); got != want {
			t.Fatalf("%q: exp %q, got %q", in, want, got)
		}
	}
}

func TestAtRoot(t *testing.T) {
	if _, err := os.Stat(path); err != nil {
		t.Skip("no /proc/self/mountinfo here")
	}
	m, ok, err := At("/")
	if err != nil || !ok {
		t.Fatalf("exp / to be a mount, got %v %v", ok, err)
	}
	if m.Point != "/" {
		t.Errorf("exp point /, got %q", m.Point)
	}
	if _, ok, _ := At("/no/such/dir/here"); ok {
		t.Error("exp no mount at a missing directory")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parse(strings.NewReader(s), func(Mount) bool { return true })
		if err != nil {
			return
		}
		for _, m := range ms {
			if strings.ContainsAny(m.Options, " \n") || strings.ContainsAny(m.FSType, " \n") {
				t.Errorf("a field holds a separator: %+v", m)
			}
		}
	})
}
