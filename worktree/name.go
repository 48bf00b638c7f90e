package worktree

import (
	"strings"
	"unicode"

	"github.com/google/uuid"
)

// MaxNameLen is the longest workspace name ValidateName accepts, in bytes.
const MaxNameLen = 64

// BranchPrefix starts the branch of every workspace: patina/<name>.
const BranchPrefix = "patina/"

// Rules a name can break; NameError.Rule is one of these.
const (
	ruleEmpty       = "is empty"
	ruleTooLong     = "is longer than the limit"
	ruleControl     = "contains a control character"
	ruleSpace       = "contains whitespace"
	ruleLeadingDash = "starts with '-'"
	ruleLeadingDot  = "starts with '.'"
	ruleSlash       = "contains '/'"
	ruleDotDot      = "contains '..'"
	ruleLockSuffix  = "ends with '.lock'"
	ruleTrailingDot = "ends with '.'"
	ruleGitChar     = `contains a character git refuses in ref names (~ ^ : ? * [ \ or "@{")`
	ruleAt          = `is "@"`
	ruleCharset     = "contains a character other than ASCII letters, digits, '.', '_' and '-'"
	ruleComponent   = "has an empty path component ('//' or a leading or trailing '/')"
	ruleKind        = "must match [a-z][a-z0-9_-]* (at most 32 bytes)"
	ruleAuthor      = "must be non-empty and contain no '<', '>' or control characters"
	ruleNotRef      = "is not a full ref name (refs/...)"
)

// ValidateName checks a workspace name before it becomes a branch
// (patina/<name>) and a directory. A valid name is 1 to MaxNameLen bytes of
// ASCII letters, digits, '.', '_' and '-', starts with a letter or digit,
// and passes git check-ref-format. The error is a *NameError (errors.Is
// ErrInvalidName) whose Rule says what failed.
func ValidateName(name string) error {
	if rule := nameRule(name); rule != "" {
		return &NameError{What: "workspace name", Name: name, Rule: rule}
	}
	return nil
}

func nameRule(name string) string {
	if name == "" {
		return ruleEmpty
	}
	if len(name) > MaxNameLen {
		return ruleTooLong + " of 64 bytes"
	}
	if rule := commonRule(name); rule != "" {
		return rule
	}
	if strings.Contains(name, "/") {
		return ruleSlash
	}
	if rule := componentRule(name); rule != "" {
		return rule
	}
	for _, r := range name {
		if !isNameChar(r) {
			return ruleCharset
		}
	}
	return ""
}

// commonRule holds the checks every kind of name gets first.
func commonRule(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return ruleControl
		}
	}
	for _, r := range s {
		if unicode.IsSpace(r) {
			return ruleSpace
		}
	}
	if s[0] == '-' {
		return ruleLeadingDash
	}
	return ""
}

// componentRule applies git's rules for one component of a ref name
// (refs.c: check_refname_component) plus "no trailing dot".
func componentRule(c string) string {
	switch {
	case c == "":
		return ruleComponent
	case c[0] == '.':
		return ruleLeadingDot
	case strings.Contains(c, ".."):
		return ruleDotDot
	case strings.HasSuffix(c, ".lock"):
		return ruleLockSuffix
	case strings.HasSuffix(c, "."):
		return ruleTrailingDot
	case strings.ContainsAny(c, "~^:?*[\\"), strings.Contains(c, "@{"):
		return ruleGitChar
	case c == "@":
		return ruleAt
	}
	return ""
}

func isNameChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
		r == '.' || r == '_' || r == '-'
}

// validateBranch checks a local branch name given by a caller (merge
// target) and returns its full ref. "main" and "refs/heads/main" are both
// accepted; the rules are git check-ref-format --branch's.
func validateBranch(branch string) (string, error) {
	short := strings.TrimPrefix(branch, "refs/heads/")
	bad := func(rule string) (string, error) {
		return "", &NameError{What: "branch", Name: branch, Rule: rule}
	}
	if short == "" {
		return bad(ruleEmpty)
	}
	if len(short) > 255 {
		return bad(ruleTooLong + " of 255 bytes")
	}
	if rule := commonRule(short); rule != "" {
		return bad(rule)
	}
	for _, c := range strings.Split(short, "/") {
		if rule := componentRule(c); rule != "" {
			return bad(rule)
		}
	}
	return "refs/heads/" + short, nil
}

// validateRef checks a full ref name (refs/...) read from outside (a
// note, a HEAD file) before it reaches git or becomes a merge target.
func validateRef(ref string) (string, error) {
	bad := func(rule string) (string, error) {
		return "", &NameError{What: "ref", Name: ref, Rule: rule}
	}
	rest, ok := strings.CutPrefix(ref, "refs/")
	if !ok || rest == "" {
		return bad(ruleNotRef)
	}
	if len(ref) > 1024 {
		return bad(ruleTooLong + " of 1024 bytes")
	}
	if rule := commonRule(ref); rule != "" {
		return bad(rule)
	}
	for _, c := range strings.Split(rest, "/") {
		if rule := componentRule(c); rule != "" {
			return bad(rule)
		}
	}
	return ref, nil
}

// validateRev checks a revision given by a caller (create base) before it
// reaches git as an argument; git then decides whether it exists.
func validateRev(rev string) error {
	bad := func(rule string) error { return &NameError{What: "revision", Name: rev, Rule: rule} }
	if rev == "" {
		return bad(ruleEmpty)
	}
	if len(rev) > 1024 {
		return bad(ruleTooLong + " of 1024 bytes")
	}
	if rule := commonRule(rev); rule != "" {
		return bad(rule)
	}
	return nil
}

// validateKind checks an event kind, which must keep a log line parseable.
func validateKind(kind string) error {
	ok := kind != "" && len(kind) <= 32 && 'a' <= kind[0] && kind[0] <= 'z'
	for _, r := range kind {
		ok = ok && ('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_' || r == '-')
	}
	if !ok {
		return &NameError{What: "event kind", Name: kind, Rule: ruleKind}
	}
	return nil
}

// validateSignature checks an identity git will write into a commit.
func validateSignature(s Signature) error {
	for _, v := range []string{s.Name, s.Email} {
		bad := strings.TrimSpace(v) == "" || strings.ContainsAny(v, "<>")
		for _, r := range v {
			bad = bad || r < 0x20 || r == 0x7f
		}
		if bad {
			return &NameError{What: "author", Name: s.Name + " <" + s.Email + ">", Rule: ruleAuthor}
		}
	}
	return nil
}

// newIdentity returns a fresh workspace id and the short name generated
// from it: the first 8 hex digits of the uuid.
func newIdentity() (id, name string) {
	u := uuid.New()
	return u.String(), strings.ReplaceAll(u.String(), "-", "")[:8]
}

// isUUID reports whether s is a workspace id.
func isUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}
