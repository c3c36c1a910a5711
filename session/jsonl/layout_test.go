package jsonl

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// A delegation tree's sessions are files in one project directory: a new
// session makes no directory once its project's exists (issue 33: a mkdir
// and a directory per child were most of a delegation's cost).
func TestSessionsOfATreeShareOneDirectory(t *testing.T) {
	root := t.TempDir()
	st := session.NewStore(New(root), nil)
	parent, detach, err := st.Create(session.CreateOptions{ID: "root", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, parent, 1)
	if err := parent.Flush(); err != nil {
		t.Fatal(err)
	}
	defer detach()
	for i := range 5 {
		store(t, root, session.CreateOptions{ID: "child " + string(rune('a'+i)), Cwd: "/w", ParentSession: "root",
			Origin: session.OriginSubagent, DelegationDepth: 1, Seed: parent.Events()}, func(s *session.Session) { appendTurn(t, s, 2) })
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel != "." && rel != "--w--" {
			t.Errorf("a session made the directory %s", rel)
		}
		if !d.IsDir() {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--w--/child~0020a.jsonl", "--w--/child~0020b.jsonl", "--w--/child~0020c.jsonl",
		"--w--/child~0020d.jsonl", "--w--/child~0020e.jsonl", "--w--/root.jsonl"}
	for i := range want {
		want[i] = filepath.FromSlash(want[i])
	}
	if !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
}

// Sessions written by the previous build (testdata/layout1: one directory
// per session, <project>/<id>/session.jsonl) still list, read and resume
// where they are, and their ids stay taken.
func TestEarlierLayoutStillServes(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/layout1")); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(root, "--w-q--", "open", FileName)
	st := session.NewStore(New(root), nil)
	hs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hs {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	if want := []string{"child-1", "open", "root one"}; !slices.Equal(ids, want) {
		t.Fatalf("List: %q, want %q", ids, want)
	}

	h, events, err := st.Read("child-1")
	if err != nil || h.ParentSession != "root one" || h.SeedLength == 0 || len(events) <= h.SeedLength {
		t.Fatalf("Read child-1: parent %q, seed %d, %d events, %v", h.ParentSession, h.SeedLength, len(events), err)
	}

	// Resume: the interrupted turn is closed and new events are appended
	// to the old file; no file of the new layout appears.
	before := fileSize(t, old)
	s, detach, err := st.Load(context.Background(), "open")
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, session.TypeUserMessage, content.UserText("resumed"))
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if fileSize(t, old) <= before {
		t.Error("the resumed session did not grow its file")
	}
	if _, err := os.Stat(filepath.Join(root, "--w-q--", "open"+Ext)); err == nil {
		t.Error("resuming an old session made a file of the new layout")
	}
	if _, events, err := st.Read("open"); err != nil || content.JoinText(events[len(events)-1].Data.(content.Message).Content) != "resumed" {
		t.Errorf("Read after resume: %v", err)
	}

	// An old id is taken, in this backend and in a new one.
	_, err = New(root).Create(session.Header{ID: "root one", Cwd: "/w/p"})
	wantCode(t, err, session.CodeExists, "root one")
	b := New(root)
	if p, err := b.Create(session.Header{ID: "fresh", Cwd: "/w/p"}); err != nil {
		t.Fatal(err)
	} else {
		p.Close()
	}
	_, err = b.Create(session.Header{ID: "child-1", Cwd: "/w/p"})
	wantCode(t, err, session.CodeExists, "child-1")

	// A new child of an old root lands beside it, in the new layout.
	_, rootEvents, err := st.Read("root one")
	if err != nil {
		t.Fatal(err)
	}
	store(t, root, session.CreateOptions{ID: "child-2", Cwd: "/w/p", ParentSession: "root one", Origin: session.OriginSubagent,
		DelegationDepth: 1, Seed: rootEvents}, func(s *session.Session) { appendTurn(t, s, 2) })
	if _, err := os.Stat(filepath.Join(root, "--w-p--", "child-2"+Ext)); err != nil {
		t.Error(err)
	}
	if hs, err := st.List(); err != nil || len(hs) != 4 {
		t.Errorf("List after a new child: %d sessions, %v", len(hs), err)
	}
}
