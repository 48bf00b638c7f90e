package worktree

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateNameAccepts(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"a", "A", "0", "fix-login", "fix_login", "v1.2", "a.b.c", "x-", "a_", "UPPER", "1a2b3c4d",
		"HEAD", "lock", "a.lockx", strings.Repeat("n", MaxNameLen),
	} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q): exp nil, got %v", name, err)
			continue
		}
		// Whatever patina accepts, git must accept as a branch.
		if _, err := gitTry("", "check-ref-format", "refs/heads/"+BranchPrefix+name); err != nil {
			t.Errorf("git check-ref-format refuses accepted name %q: %v", name, err)
		}
	}
}

func TestValidateNameRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rule string
	}{
		{"", ruleEmpty},
		{strings.Repeat("n", MaxNameLen+1), ruleTooLong},
		{"-rf", ruleLeadingDash},
		{"--force", ruleLeadingDash},
		{"-", ruleLeadingDash},
		{".hidden", ruleLeadingDot},
		{".", ruleLeadingDot},
		{"..", ruleLeadingDot},
		{"a..b", ruleDotDot},
		{"../../etc", ruleSlash},
		{"a/b", ruleSlash},
		{"/abs", ruleSlash},
		{"a/", ruleSlash},
		{"a//b", ruleSlash},
		{"tab\there", ruleControl},
		{"new\nline", ruleControl},
		{"nul\x00byte", ruleControl},
		{"del\x7f", ruleControl},
		{"esc\x1b[31m", ruleControl},
		{"has space", ruleSpace},
		{" lead", ruleSpace},
		{"nbsp\u00a0x", ruleSpace},
		{"name.lock", ruleLockSuffix},
		{"trailing.", ruleTrailingDot},
		{"tilde~1", ruleGitChar},
		{"caret^", ruleGitChar},
		{"colon:x", ruleGitChar},
		{"what?", ruleGitChar},
		{"star*", ruleGitChar},
		{"open[", ruleGitChar},
		{`back\slash`, ruleGitChar},
		{"at@{1}", ruleGitChar},
		{"@", ruleAt},
		{"a@b", ruleCharset},
		{"semi;colon", ruleCharset},
		{"$(reboot)", ruleCharset},
		{"quote'", ruleCharset},
		{"héllo", ruleCharset},
		{"emoji😀", ruleCharset},
		{"pipe|x", ruleCharset},
	}
	for _, tc := range tests {
		err := ValidateName(tc.name)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q): exp ErrInvalidName, got %v", tc.name, err)
			continue
		}
		var ne *NameError
		if !errors.As(err, &ne) {
			t.Errorf("ValidateName(%q): exp *NameError, got %T", tc.name, err)
			continue
		}
		if !strings.HasPrefix(ne.Rule, tc.rule) {
			t.Errorf("ValidateName(%q): exp rule %q, got %q", tc.name, tc.rule, ne.Rule)
		}
		if !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("ValidateName(%q): exp message naming rule %q, got %q", tc.name, tc.rule, err)
		}
	}
}

func TestValidateBranch(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"main":                  "refs/heads/main",
		"refs/heads/main":       "refs/heads/main",
		"feature/login":         "refs/heads/feature/login",
		"release-1.2":           "refs/heads/release-1.2",
		"patina/other":          "refs/heads/patina/other",
		"ünïcode":               "refs/heads/ünïcode",
		"refs/heads/a/b/c/d/e0": "refs/heads/a/b/c/d/e0",
	}
	for in, exp := range good {
		got, err := validateBranch(in)
		if err != nil || got != exp {
			t.Errorf("validateBranch(%q): exp %q, got %q, %v", in, exp, got, err)
		}
		if _, err := gitTry("", "check-ref-format", "--branch", strings.TrimPrefix(in, "refs/heads/")); err != nil {
			t.Errorf("git refuses branch %q that validateBranch accepts: %v", in, err)
		}
	}
	bad := map[string]string{
		"":                       ruleEmpty,
		"refs/heads/":            ruleEmpty,
		"-main":                  ruleLeadingDash,
		"a b":                    ruleSpace,
		"a\nb":                   ruleControl,
		"a//b":                   ruleComponent,
		"a/":                     ruleComponent,
		"/a":                     ruleComponent,
		"a/.b":                   ruleLeadingDot,
		"a..b":                   ruleDotDot,
		"a.lock":                 ruleLockSuffix,
		"a/b.lock":               ruleLockSuffix,
		"a.":                     ruleTrailingDot,
		"a~b":                    ruleGitChar,
		"a@{u}":                  ruleGitChar,
		"@":                      ruleAt,
		strings.Repeat("b", 256): ruleTooLong,
	}
	for in, rule := range bad {
		_, err := validateBranch(in)
		var ne *NameError
		if !errors.As(err, &ne) || !errors.Is(err, ErrInvalidName) || !strings.HasPrefix(ne.Rule, rule) {
			t.Errorf("validateBranch(%q): exp rule %q, got %v", in, rule, err)
		}
	}
}

func TestValidateRevAndKindAndSignature(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"main", "HEAD~2", "v1.0", "origin/main", "0123abcd", "HEAD^{commit}"} {
		if err := validateRev(rev); err != nil {
			t.Errorf("validateRev(%q): exp nil, got %v", rev, err)
		}
	}
	for _, rev := range []string{"-x", "--output=/tmp/x", "a\nb", "a b", strings.Repeat("r", 1025)} {
		if err := validateRev(rev); !errors.Is(err, ErrInvalidName) {
			t.Errorf("validateRev(%q): exp ErrInvalidName, got %v", rev, err)
		}
	}
	for _, k := range []string{"command", "created", "x", "a-b_c9"} {
		if err := validateKind(k); err != nil {
			t.Errorf("validateKind(%q): exp nil, got %v", k, err)
		}
	}
	for _, k := range []string{"", "Command", "9lives", "has space", "a:b", "a(b)", strings.Repeat("k", 33)} {
		if err := validateKind(k); !errors.Is(err, ErrInvalidName) {
			t.Errorf("validateKind(%q): exp ErrInvalidName, got %v", k, err)
		}
	}
	for _, s := range []Signature{{"", "a@b"}, {"a", ""}, {"a<b", "c"}, {"a", "b>"}, {"a\nb", "c"}, {" ", "c"}} {
		if err := validateSignature(s); !errors.Is(err, ErrInvalidName) {
			t.Errorf("validateSignature(%+v): exp ErrInvalidName, got %v", s, err)
		}
	}
	if err := validateSignature(DefaultAuthor); err != nil {
		t.Errorf("validateSignature(DefaultAuthor): %v", err)
	}
}

func TestNewIdentity(t *testing.T) {
	t.Parallel()
	id, name := newIdentity()
	if !isUUID(id) {
		t.Fatalf("exp uuid id, got %q", id)
	}
	if len(name) != 8 || ValidateName(name) != nil || !strings.HasPrefix(strings.ReplaceAll(id, "-", ""), name) {
		t.Fatalf("exp 8-hex-digit name from %s, got %q", id, name)
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"ok", "-x", "a..b", "a/b", "x.lock", "a b", "\x00", "héllo", "a@{", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidateName(name) != nil {
			return
		}
		// Accepted names are safe as a path component and a ref component.
		if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) ||
			name[0] == '-' || name[0] == '.' || strings.Contains(name, "..") ||
			strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") {
			t.Fatalf("accepted bad name %q", name)
		}
		for _, r := range name {
			if !isNameChar(r) {
				t.Fatalf("accepted name %q with %q", name, r)
			}
		}
	})
}
