package agent

import (
	"testing"

	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// A file head is checked whole, the workspace's root (".") too: a hostile
// agent's negative size or unknown type is refused, not passed on.
func TestFileHeadRefusesWhatIsWrong(t *testing.T) {
	ok := []wire.FileHead{
		{FileInfo: wire.FileInfo{Name: ".", Type: "dir"}, IsDir: true, Entries: []wire.FileInfo{{Name: "a.txt", Type: "file", Size: 3}}},
		{FileInfo: wire.FileInfo{Name: "a.txt", Type: "file", Size: 3}},
	}
	for _, h := range ok {
		if err := (*fileHead)(&h).validate(0); err != nil {
			t.Errorf("%+v: exp accepted, got %v", h, err)
		}
	}
	bad := []wire.FileHead{
		{FileInfo: wire.FileInfo{Name: ".", Type: "file", Size: -1}},
		{FileInfo: wire.FileInfo{Name: ".", Type: "device"}},
		{FileInfo: wire.FileInfo{Name: "", Type: "file"}},
		{FileInfo: wire.FileInfo{Name: "a/b", Type: "file"}},
		{FileInfo: wire.FileInfo{Name: ".", Type: "dir"}, IsDir: true, Entries: []wire.FileInfo{{Name: "x\x00y", Type: "file"}}},
	}
	for _, h := range bad {
		if err := (*fileHead)(&h).validate(0); err == nil {
			t.Errorf("%+v: exp refused", h)
		}
	}
}
