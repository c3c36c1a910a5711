package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
)

// FuzzParseLog reads arbitrary bytes as a recorded session file: an error,
// or a log from which a recording derives calls that end with their finish
// chunk when they say they are finished. Never a panic.
func FuzzParseLog(f *testing.F) {
	golden, _ := filepath.Glob("../../cmd/dsh/testdata/golden/*/sessions/session.jsonl")
	for _, path := range golden {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	header := `{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}` + "\n"
	f.Add([]byte(header))
	f.Add([]byte(header + `{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"finish","index":0,"finish":{"kind":"stop"}}}}`))
	f.Add([]byte(header + `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n" + `{"type":"assistant/ch`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLog(data)
		if err != nil {
			return
		}
		rec, err := New([]Log{l})
		if err != nil {
			return
		}
		for _, c := range rec.Root().Calls {
			if len(c.Chunks) != len(c.ChunkTimes) || len(c.Chunks) == 0 {
				t.Fatalf("call of turn %d step %d: %d chunks, %d times", c.Turn, c.Step, len(c.Chunks), len(c.ChunkTimes))
			}
			if c.Finished != (c.Chunks[len(c.Chunks)-1].Type == content.ChunkFinish) {
				t.Fatalf("call of turn %d step %d: finished %t, last chunk %s", c.Turn, c.Step, c.Finished, c.Chunks[len(c.Chunks)-1].Type)
			}
		}
	})
}

// FuzzDiffText: two texts differ exactly when a difference is reported,
// and the report is valid UTF-8 when they are.
func FuzzDiffText(f *testing.F) {
	f.Add("same", "same")
	f.Add("Probe the workspace.", "Probe the whole workspace.")
	f.Add("line one\nline two", "line one\nline 2")
	f.Add("héllo wörld", "héllo wòrld")
	f.Add(strings.Repeat("a", 200)+"x", strings.Repeat("a", 200)+"y")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := diffText(a, b)
		if (d == "") != (a == b) {
			t.Fatalf("diffText(%q, %q) = %q", a, b, d)
		}
		if utf8.ValidString(a) && utf8.ValidString(b) && !utf8.ValidString(d) {
			t.Fatalf("diffText(%q, %q) is not UTF-8: %q", a, b, d)
		}
	})
}
