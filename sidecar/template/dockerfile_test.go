package template

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCheckDockerfile(t *testing.T) {
	ok := []struct {
		name, df string
		images   []string
	}{
		{"plain", "FROM patina/base:bookworm\nRUN true\n", []string{"patina/base:bookworm"}},
		{"stages", "FROM a:1 AS build\nRUN x\nFROM build\nCOPY --from=build /a /b\nCOPY --from=0 /a /c\nCOPY --from=tools:2 /t /t\n", []string{"a:1", "tools:2"}},
		{"continuation and comments", "# escape=`\nFROM `\n# a comment\n\n  base:1\nADD a b\n", []string{"base:1"}},
		{"flags", "FROM --platform=linux/amd64 base:1\nADD --chown=1:1 local.tar /x\n", []string{"base:1"}},
		{"scratch", "FROM scratch\nCOPY a /a\n", nil},
	}
	for _, c := range ok {
		got, err := CheckDockerfile("Dockerfile", []byte(c.df))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(got.Images, c.images) {
			t.Errorf("%s: images %q, want %q", c.name, got.Images, c.images)
		}
	}
	bad := []struct{ name, df, want string }{
		{"add url", "FROM b\nADD http://169.254.169.254/latest/meta-data /x\n", "ADD http://169.254.169.254"},
		{"add url json", "FROM b\nADD [\"https://10.0.0.1/x\", \"/x\"]\n", "ADD https://10.0.0.1/x"},
		{"add url continued", "FROM b\nadd \\\n  # hidden\n  http://10.0.0.1/x \\\n  /x\n", "ADD http://10.0.0.1/x"},
		{"add url in onbuild", "FROM b\nONBUILD ADD http://10.0.0.1/x /x\n", "ADD http://10.0.0.1/x"},
		{"add git", "FROM b\nADD git@example.com:a/b.git /x\n", "ADD git@"},
		{"add variable", "FROM b\nARG U=http://10.0.0.1/\nADD $U /x\n", "ADD $U"},
		{"from variable", "ARG X=10.0.0.5:5000/x\nFROM $X\n", "FROM $X"},
		{"from-flag variable", "FROM b\nCOPY --from=${X} /a /b\n", "--from=${X}"},
		{"no from", "RUN true\n", "has no FROM"},
	}
	for _, c := range bad {
		_, err := CheckDockerfile("Dockerfile", []byte(c.df))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrInvalid with %q", c.name, err, c.want)
		}
	}
}
