package jsonl

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/session"
)

func TestProjectKey(t *testing.T) {
	long := "/" + strings.Repeat("a", 300)
	for _, tc := range []struct{ cwd, want string }{
		{"", "_no-cwd"},
		{"/", "--root--"},
		{"///", "--root--"},
		{"/home/ann/src/dsh", "--home-ann-src-dsh--"},
		{"/home//ann/", "--home-ann---"},
		{"/a-b/c_d/e.f", "--a-b-c_d-e.f--"},
		{"/-lead", "--lead--"},
		{`C:\Users\Ann\x`, "--C-Users-Ann-x--"},
		{`\\server\share:/x`, "--server-share-x--"},
		{"/my project", "--my~0020project--"},
		{"/tilde~x", "--tilde~007Ex--"},
		{"/café", "--caf~00E9--"},
		{"/日本", "--~65E5~672C--"},
		{"/😀", "--~D83D~DE00--"},
		{long, "--" + strings.Repeat("a", 251) + "--"},
		{"/" + strings.Repeat("a", 249) + "/é", "--" + strings.Repeat("a", 249) + "-~--"},
	} {
		if got := ProjectKey(tc.cwd); got != tc.want {
			t.Errorf("ProjectKey(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
}

func TestEncodeID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"0b9f3c1e-7d2a-4c55-9e1f-0123456789ab", "0b9f3c1e-7d2a-4c55-9e1f-0123456789ab"},
		{"a.b_c-D", "a.b_c-D"},
		{".", "~002E"},
		{"..", "~002E~002E"},
		{"...", "..."},
		{"a/../b", "a~002F..~002Fb"},
		{`a\b:c`, "a~005Cb~003Ac"},
		{"x y~z", "x~0020y~007Ez"},
		{"é😀", "~00E9~D83D~DE00"},
		{"nul\x00", "nul~0000"},
	} {
		got := EncodeID(tc.id)
		if got != tc.want {
			t.Errorf("EncodeID(%q) = %q, want %q", tc.id, got, tc.want)
		}
		if filepath.Base(got) != got || got == "." || got == ".." {
			t.Errorf("EncodeID(%q) = %q is not a single safe path segment", tc.id, got)
		}
	}
}

func TestPath(t *testing.T) {
	b := New("/r")
	if got, want := b.Path(session.Header{ID: "s 1", Cwd: "/w/p"}), filepath.Join("/r", "--w-p--", "s~00201.jsonl"); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
	if got, want := b.Path(session.Header{ID: ".."}), filepath.Join("/r", "_no-cwd", "~002E~002E.jsonl"); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
}

func TestDefaultRoot(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got, err := DefaultRoot(env(map[string]string{"DSH_HOME": "/opt/dsh"}))
	if err != nil || got != filepath.Join("/opt/dsh", "sessions") {
		t.Errorf("DefaultRoot with DSH_HOME = %q, %v", got, err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	got, err = DefaultRoot(env(nil))
	if err != nil || got != filepath.Join(home, ".dsh", "sessions") {
		t.Errorf("DefaultRoot without DSH_HOME = %q, %v; want under %s", got, err, home)
	}
}

func TestDecodeIDRoundTrip(t *testing.T) {
	for _, id := range []string{"abc", "a/b", "..", ".", "é😀x", "~002E", "sess 1", "9e1f2c"} {
		got, ok := DecodeID(EncodeID(id))
		if !ok || got != id {
			t.Errorf("DecodeID(EncodeID(%q)) = %q, %v", id, got, ok)
		}
	}
	for _, name := range []string{"~00", "~zzzz", "a~"} {
		if _, ok := DecodeID(name); ok {
			t.Errorf("DecodeID(%q) accepted", name)
		}
	}
}
