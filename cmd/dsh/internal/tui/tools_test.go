package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

func TestUnifiedDiff(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	new := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n"
	want := "@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -9,3 +9,4 @@\n i\n j\n k\n+l"
	if got := unifiedDiff("f", old, new); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := unifiedDiff("f", "", "x\n"); got != "@@ -1,0 +1,1 @@\n+x" {
		t.Fatalf("a new file: %q", got)
	}
	if got := unifiedDiff("f", "same", "same"); got != "" {
		t.Fatalf("no change: %q", got)
	}
	big := strings.Repeat("x\n", maxDiffLines+1)
	if got := unifiedDiff("f", big, "y\n"); !strings.Contains(got, "too large to compare") {
		t.Fatalf("a huge file: %q", got)
	}
	var many, other strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&many, "line %d\n", i)
		fmt.Fprintf(&other, "line %d\n", i+1)
	}
	if got := unifiedDiff("f", many.String(), other.String()); !strings.Contains(got, "too large to compare") {
		t.Fatalf("two large different files: %q", got[:min(len(got), 200)])
	}
	// One line changed in a large file: only its region is compared.
	edited := strings.Replace(many.String(), "line 2500\n", "changed\n", 1)
	if got := unifiedDiff("f", many.String(), edited); !strings.Contains(got, "@@ -2498,7 +2498,7 @@") || !strings.Contains(got, "\n+changed") {
		t.Fatalf("one line of a large file: %q", got)
	}
}

// The diff of an edit is the file's, with its line numbers; a FIFO the
// model names is never opened.
func TestToolDiffReadsOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	got := toolDiff("edit_file", `{"path":"f.txt","old_string":"two","new_string":"2"}`, dir)
	if got != "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three" {
		t.Fatalf("edit diff %q", got)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Skip(err)
	}
	if got := toolDiff("write_file", `{"path":"pipe","content":"x\n"}`, dir); got != "" {
		t.Fatalf("write over a FIFO: %q", got)
	}
	if got := toolDiff("write_file", `{"path":"new.txt","content":"x\n"}`, dir); got != "@@ -1,0 +1,1 @@\n+x" {
		t.Fatalf("a new file: %q", got)
	}
	if got := toolSummary("bash", `{"command":"ls -la"}`); got != "$ ls -la" {
		t.Fatalf("bash summary %q", got)
	}
}

// On a narrow terminal a child's row shortens its label first: its
// status, time and tokens stay.
func TestChildRowShortensTheLabelFirst(t *testing.T) {
	now := time.Now()
	r := &childRow{info: subagent.RunInfo{Provider: "spawn", Label: "find every TODO comment in the repository and sort them", ChildID: "c"},
		started: now.Add(-5 * time.Second), status: "running", child: "0123abcd", usage: content.Usage{Output: 1500}}
	line := r.line(now, 1, 60)
	if ansi.StringWidth(line) > 60 || !strings.Contains(line, "running 5s · 1.5k tokens") || !strings.Contains(line, "…") {
		t.Fatalf("%q", line)
	}
}

// The history outlives the session in a file of mode 0600, bounded; a
// FIFO in its place is never opened.
func TestHistoryFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "history")
	var h history
	h.load(file)
	for i := range 2*maxHistory + 10 {
		h.add(fmt.Sprintf("prompt %d\nline two", i))
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	var again history
	again.load(file)
	if len(again.items) != maxHistory || again.items[maxHistory-1] != fmt.Sprintf("prompt %d\nline two", 2*maxHistory+9) {
		t.Fatalf("%d items, last %q", len(again.items), again.items[len(again.items)-1])
	}
	if got, at := again.search("PROMPT 1000", len(again.items)); at < 0 || !strings.HasPrefix(got, "prompt 1000") {
		t.Fatalf("search: %q %d", got, at)
	}
	fifo := filepath.Join(t.TempDir(), "history")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	var f history
	f.load(fifo)
	f.add("does not block")
}
