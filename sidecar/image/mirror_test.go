package image

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMirror(t *testing.T) {
	tests := []struct {
		root    string // under testdata/apt
		suite   string
		exp     string
		expErr  error
		errHint string // a substring of the error
	}{
		// This machine's shape: a deb822 debian.sources, files renamed
		// *.disabled-by-farm that would match but must be ignored.
		{root: "host-deb822", suite: "bookworm", exp: "http://deb.example.invalid/debian"},
		{root: "host-deb822", suite: "bookworm-security", exp: "http://deb.example.invalid/debian-security"},
		{root: "host-deb822", suite: "trixie", expErr: ErrNoMirror, errHint: "no enabled deb source lists it"},
		// One-line format: comments, deb-src, -security and -updates suites
		// skipped; [options] parsed; trailing slash and comment dropped.
		{root: "oneline", suite: "bookworm", exp: "http://mirror.example.invalid/debian"},
		{root: "oneline", suite: "bookworm-updates", exp: "http://updates.example.invalid/debian"},
		// sources.list is read before sources.list.d.
		{root: "list-first", suite: "bookworm", exp: "http://main-list.example.invalid/debian"},
		// "Enabled: no" skipped; .sources and .list mixed in name order.
		{root: "disabled", suite: "bookworm", exp: "http://on.example.invalid/debian"},
		// cdrom: skipped for the next usable source.
		{root: "cdrom", suite: "bookworm", exp: "http://after-cdrom.example.invalid/debian"},
		{root: "cdrom-only", suite: "bookworm", expErr: ErrNoMirror, errHint: "debootstrap cannot use cdrom:[Debian GNU/Linux 12.5.0"},
		{root: "security-only", suite: "bookworm", expErr: ErrNoMirror},
		{root: "empty", suite: "bookworm", expErr: ErrNoMirror},
		// Architecture restrictions.
		{root: "other-arch", suite: "bookworm", exp: "http://any.example.invalid/debian"},
		{root: "other-arch-deb822", suite: "bookworm", exp: "http://any.example.invalid/debian"},
		// deb822 with case-insensitive fields, continuation lines, comments
		// inside a stanza, an embedded key and a cdrom: URI first.
		{root: "deb822-rich", suite: "bookworm", exp: "http://rich.example.invalid/debian"},
		{root: "deb822-rich", suite: "bookworm-updates", exp: "http://rich.example.invalid/debian"},
		// file: mirrors count when dists/<suite> exists under Root.
		{root: "file-mirror", suite: "bookworm", exp: "file:///srv/mirror"},
		// Names apt ignores (~, .save) are ignored.
		{root: "bad-names", suite: "bookworm", exp: "http://good.example.invalid/debian"},
	}
	for _, tt := range tests {
		t.Run(tt.root+"/"+tt.suite, func(t *testing.T) {
			got, err := Mirror(AptConfig{Root: filepath.Join("testdata", "apt", tt.root)}, tt.suite)
			if tt.expErr != nil {
				if !errors.Is(err, tt.expErr) {
					t.Fatalf("exp error %v, got %q, %v", tt.expErr, got, err)
				}
				if !strings.Contains(err.Error(), tt.errHint) {
					t.Fatalf("exp error containing %q, got %v", tt.errHint, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("exp %s, got error %v", tt.exp, err)
			}
			if got != tt.exp {
				t.Fatalf("exp %s, got %s", tt.exp, got)
			}
		})
	}
}

// TestMirrorHost reads this machine's apt configuration: whatever it holds,
// the answer is a URI debootstrap can use or ErrNoMirror.
func TestMirrorHost(t *testing.T) {
	got, err := Mirror(AptConfig{}, DefaultSuite)
	if err != nil {
		if !errors.Is(err, ErrNoMirror) {
			t.Fatalf("exp a mirror or ErrNoMirror, got %v", err)
		}
		t.Logf("no mirror here: %v", err)
		return
	}
	if !usableURI("/", got, DefaultSuite) {
		t.Fatalf("exp a usable URI, got %q", got)
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		name string
		in   string
		exp  []source
	}{
		{name: "plain", in: "deb http://a.example.invalid/debian bookworm main contrib\n",
			exp: []source{{line: 1, types: []string{"deb"}, uris: []string{"http://a.example.invalid/debian"}, suites: []string{"bookworm"}, components: []string{"main", "contrib"}, enabled: true}}},
		{name: "tabs and options", in: "\n\tdeb\t[arch=amd64,arm64 signed-by=/k.gpg]\thttp://a.example.invalid/d  bookworm\tmain\n",
			exp: []source{{line: 2, types: []string{"deb"}, uris: []string{"http://a.example.invalid/d"}, suites: []string{"bookworm"}, components: []string{"main"}, architectures: []string{"amd64", "arm64"}, enabled: true}}},
		{name: "spaced options and arch-", in: "deb [ arch-=i386 ] http://a.example.invalid/d bookworm main",
			exp: []source{{line: 1, types: []string{"deb"}, uris: []string{"http://a.example.invalid/d"}, suites: []string{"bookworm"}, components: []string{"main"}, excludedArchs: []string{"i386"}, enabled: true}}},
		{name: "cdrom", in: "deb cdrom:[Debian GNU/Linux 12 _Bookworm_]/ bookworm main",
			exp: []source{{line: 1, types: []string{"deb"}, uris: []string{"cdrom:[Debian GNU/Linux 12 _Bookworm_]/"}, suites: []string{"bookworm"}, components: []string{"main"}, enabled: true}}},
		{name: "flat repository", in: "deb http://a.example.invalid/flat ./",
			exp: []source{{line: 1, types: []string{"deb"}, uris: []string{"http://a.example.invalid/flat"}, suites: []string{"./"}, components: []string{}, enabled: true}}},
		{name: "comments and junk", in: "# deb http://x.example.invalid/ bookworm main\ndeb\ndeb [arch=amd64 http://x.example.invalid/ bookworm\ndeb http://x.example.invalid/\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseList("f", []byte(tt.in))
			for i := range tt.exp {
				tt.exp[i].file = "f"
			}
			if len(got) == 0 && len(tt.exp) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.exp) {
				t.Fatalf("exp %+v, got %+v", tt.exp, got)
			}
		})
	}
}

func TestParseDeb822(t *testing.T) {
	in := `# header

Types: deb deb-src
URIs: http://a.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Architectures: amd64
Enabled: yes

# a stanza that lacks URIs is dropped
Types: deb
Suites: bookworm

types: deb
uris: http://b.example.invalid/debian
suites:
 bookworm
enabled: No
`
	exp := []source{
		{file: "f", line: 3, types: []string{"deb", "deb-src"}, uris: []string{"http://a.example.invalid/debian"}, suites: []string{"bookworm", "bookworm-updates"}, components: []string{"main"}, architectures: []string{"amd64"}, enabled: true},
		{file: "f", line: 14, types: []string{"deb"}, uris: []string{"http://b.example.invalid/debian"}, suites: []string{"bookworm"}, components: []string{}, architectures: []string{}, enabled: false},
	}
	got := parseDeb822("f", []byte(in))
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("exp %+v, got %+v", exp, got)
	}
}

func TestQuotedFields(t *testing.T) {
	tests := []struct {
		in  string
		exp []string
	}{
		{"", nil},
		{"  a  b\tc ", []string{"a", "b", "c"}},
		{`cdrom:[A B]/ bookworm`, []string{"cdrom:[A B]/", "bookworm"}},
		{`"http://a.example.invalid/x y" bookworm`, []string{"http://a.example.invalid/x y", "bookworm"}},
		{`[unclosed a b`, []string{"[unclosed a b"}},
	}
	for _, tt := range tests {
		if got := quotedFields(tt.in); !reflect.DeepEqual(got, tt.exp) {
			t.Errorf("quotedFields(%q): exp %q, got %q", tt.in, tt.exp, got)
		}
	}
}

func TestUsableURI(t *testing.T) {
	root := filepath.Join("testdata", "apt", "file-mirror")
	tests := []struct {
		uri string
		exp bool
	}{
		{"http://a.example.invalid/debian", true},
		{"HTTPS://a.example.invalid/debian/", true},
		{"ftp://a.example.invalid/debian", true},
		{"http:///debian", false},
		{"file:///srv/mirror", true},
		{"file:/srv/mirror", true},
		{"file:///srv/missing", false},
		{"file:relative", false},
		{"cdrom:[Debian]/", false},
		{"copy:/srv/mirror", false},
		{"mirror+http://a.example.invalid/list", false},
		{"tor+http://a.example.invalid/debian", false},
		{"-http://a.example.invalid/", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := usableURI(root, tt.uri, "bookworm"); got != tt.exp {
			t.Errorf("usableURI(%q): exp %v, got %v", tt.uri, tt.exp, got)
		}
	}
}

func FuzzParseList(f *testing.F) {
	f.Add("deb [arch=amd64 signed-by=/k] http://a.example.invalid/debian bookworm main # c\n")
	f.Add("deb cdrom:[Debian GNU/Linux]/ bookworm main\n\tdeb-src \"http://x y\" z")
	f.Fuzz(func(t *testing.T, in string) {
		for _, s := range parseList("f", []byte(in)) {
			if len(s.types) != 1 || len(s.uris) != 1 || len(s.suites) != 1 {
				t.Fatalf("malformed source %+v from %q", s, in)
			}
		}
	})
}

func FuzzParseDeb822(f *testing.F) {
	f.Add("Types: deb\nURIs: http://a.example.invalid/debian\nSuites: bookworm\nComponents: main\n\n# c\nEnabled: no\n")
	f.Add(" continued\nfield\n:\n\n\t\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, s := range parseDeb822("f", []byte(in)) {
			if len(s.types) == 0 || len(s.uris) == 0 || len(s.suites) == 0 {
				t.Fatalf("malformed source %+v from %q", s, in)
			}
		}
	})
}
