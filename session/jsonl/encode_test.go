package jsonl

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dsh-go/dsh/session"
)

// TestHeaderRecordMatchesJSON: the header record and a child's tag are
// written as encoding/json writes them, whatever the ids, paths and origin
// hold.
func TestHeaderRecordMatchesJSON(t *testing.T) {
	strs := []string{"", "abc", `"q" \ b`, "<&>", "\x00\x1f\x7f\n\t", "é\u2028\u2029", "bad\xff\xe2\x82"}
	for _, s := range strs {
		for _, n := range []int{0, 1, -3} {
			h := session.Header{Version: n, ID: s, CreatedAt: int64(n) << 40, Cwd: s, ParentSession: s,
				SeedLength: n, Origin: s, DelegationDepth: n}
			want, err := json.Marshal(headerRecord{Type: recordType, Header: h})
			if err != nil {
				t.Fatal(err)
			}
			if got := appendHeader([]byte("x"), &h); !bytes.Equal(got[1:], want) {
				t.Fatalf("%+v:\ngot  %s\nwant %s", h, got[1:], want)
			}
		}
		q, _ := json.Marshal(s)
		if got, want := tagOf(s), append([]byte(sidKey), q...); !bytes.Equal(got, want) {
			t.Fatalf("tag of %q: %s, want %s", s, got, want)
		}
	}
}

// TestPathLockedMatchesPath: the cached project directory gives Path's
// name, for any root, working directory and id.
func TestPathLockedMatchesPath(t *testing.T) {
	for _, root := range []string{"", "/r", "rel/../x/", "/a//b/"} {
		b := New(root)
		for _, cwd := range []string{"", "/", "/home/u/p", "C:\\x", "/ü/..", "/home/u/p"} {
			for _, id := range []string{"6d924b17-f0c8", ".", "..", "a/b", "é", "x.y_z"} {
				h := session.Header{ID: id, Cwd: cwd}
				b.mu.Lock()
				got := b.pathLocked(h)
				b.mu.Unlock()
				if want := b.Path(h); got != want {
					t.Fatalf("root %q, cwd %q, id %q: %q, want %q", root, cwd, id, got, want)
				}
			}
		}
	}
}
