package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/google/go-cmp/cmp"
)

// liveTree is a root session and its children, written through one
// backend (one process).
type liveTree struct {
	b       *Backend
	st      *session.Store
	s       map[string]*session.Session
	detach  map[string]func() error
	rootDir string
}

// newTree writes root "root" at cwd /w with a completed turn, then a spawn
// child "c1", a fork child "c2" and a grandchild "g" (c1's), interleaving
// their batches with the parent's; every session stays open.
func newTree(t *testing.T, root string) *liveTree {
	t.Helper()
	b := New(root)
	tr := &liveTree{b: b, st: session.NewStore(b, nil), s: map[string]*session.Session{}, detach: map[string]func() error{},
		rootDir: filepath.Join(root, ProjectKey("/w"))}
	add := func(opts session.CreateOptions) *session.Session {
		s, detach, err := tr.st.Create(opts)
		if err != nil {
			t.Fatal(err)
		}
		tr.s[opts.ID], tr.detach[opts.ID] = s, detach
		return s
	}
	r := add(session.CreateOptions{ID: "root", Cwd: "/w"})
	appendTurn(t, r, 1)
	flush(t, r)
	c1 := add(session.CreateOptions{ID: "c1", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
	appendOpenTurn(t, c1, 1)
	flush(t, c1)
	c2 := add(session.CreateOptions{ID: "c2", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1,
		Seed: session.CompletedPrefix(r.Events())})
	appendTurn(t, r, 2)
	flush(t, r)
	appendTurn(t, c2, c2.LastTurn()+1)
	flush(t, c2)
	g := add(session.CreateOptions{ID: "g", Cwd: "/w", ParentSession: "c1", Origin: session.OriginSubagent, DelegationDepth: 2})
	appendTurn(t, g, 1)
	flush(t, g)
	mustAppend(t, c1, session.TypeStepEnd, session.Step{Turn: 1, Step: 1})
	flush(t, c1)
	return tr
}

func flush(t testing.TB, s *session.Session) {
	t.Helper()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (tr *liveTree) closeAll(t *testing.T) {
	t.Helper()
	for _, id := range []string{"c1", "root", "g", "c2"} { // the root before some of its children
		if err := tr.detach[id](); err != nil {
			t.Fatal(err)
		}
	}
}

var treeIDs = []string{"c1", "c2", "g", "root"}

// Issue 33: a delegation tree's children cost no file. Their lines go to
// their root's file, tagged with their id, and each child's name is a hard
// link to that file; every session reads, loads, lists and resumes by its
// name as before.
func TestChildrenLiveInTheirRootsFile(t *testing.T) {
	root := t.TempDir()
	tr := newTree(t, root)
	want := map[string][]session.Event{}
	headers := map[string]session.Header{}
	for id, s := range tr.s {
		want[id], headers[id] = s.Events(), s.Header()
	}

	entries, _ := os.ReadDir(tr.rootDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if w := []string{"c1.jsonl", "c2.jsonl", "g.jsonl", "root.jsonl"}; !slices.Equal(names, w) {
		t.Fatalf("project directory holds %q, want %q", names, w)
	}
	rootFile := filepath.Join(tr.rootDir, "root.jsonl")
	rootInfo, _ := os.Stat(rootFile)
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(tr.rootDir, n)); err != nil || !os.SameFile(fi, rootInfo) {
			t.Errorf("%s is not a link to the root's file: %v", n, err)
		}
	}
	ls := lines(t, rootFile)
	if !strings.HasPrefix(ls[0], `{"type":"session",`) || !strings.Contains(ls[0], `"id":"root"`) {
		t.Errorf("line 1 is not the root's header: %s", ls[0])
	}
	tagged := 0
	for _, l := range ls[1 : len(ls)-1] {
		if strings.HasPrefix(l, `{"sid":"`) {
			tagged++
		}
	}
	if n := len(want["c1"]) + len(want["c2"]) + len(want["g"]) + 3; tagged != n {
		t.Errorf("%d tagged lines, want the children's %d events and 3 headers", tagged, n)
	}

	// Another process reads every session by its name while they are written.
	other := New(root)
	for _, id := range treeIDs {
		h, events, live, err := other.Read(id)
		if err != nil || !live {
			t.Fatalf("Read %s: live %v, %v", id, live, err)
		}
		if diff := cmp.Diff(want[id], events); diff != "" || h != headers[id] {
			t.Errorf("Read %s: header %+v, events (-want +got):\n%s", id, h, diff)
		}
	}
	_, _, _, err := other.Load("c2")
	wantCode(t, err, session.CodeBusy, filepath.Join(tr.rootDir, "c2.jsonl"))
	// In the writing process, a session open for writing is busy too; once
	// closed, it loads beside the others through their handle.
	_, _, _, err = tr.b.Load("c2")
	wantCode(t, err, session.CodeBusy, "c2")
	if err := tr.detach["c2"](); err != nil {
		t.Fatal(err)
	}
	// The process's own lock does not make its closed sessions live.
	for id, wantLive := range map[string]bool{"c2": false, "root": true, "c1": true} {
		if _, events, live, err := tr.b.Read(id); err != nil || live != wantLive || !cmp.Equal(want[id], events) {
			t.Errorf("Read %s in the writing process: live %v (want %v), %d events, %v", id, live, wantLive, len(events), err)
		}
	}
	if _, events, p, err := tr.b.Load("c2"); err != nil || !cmp.Equal(want["c2"], events) {
		t.Fatalf("Load of a closed child beside its open root: %d events, %v", len(events), err)
	} else {
		p.Close()
	}
	tr.closeAll(t)

	hs, err := New(root).List()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(hs, func(a, b session.Header) int { return strings.Compare(a.ID, b.ID) })
	if diff := cmp.Diff([]session.Header{headers["c1"], headers["c2"], headers["g"], headers["root"]}, hs); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	for _, id := range treeIDs {
		h, events, p, err := New(root).Load(id)
		if err != nil {
			t.Fatalf("Load %s: %v", id, err)
		}
		p.Close()
		if diff := cmp.Diff(want[id], events); diff != "" || h != headers[id] {
			t.Errorf("Load %s: header %+v, events (-want +got):\n%s", id, h, diff)
		}
	}

	// A later process resumes a child and its root at once: one handle, one
	// lock; the child's interrupted turn is closed in its own lines.
	st := session.NewStore(New(root), nil)
	c1, detachC1, err := st.Load(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	r, detachRoot, err := st.Load(context.Background(), "root")
	if err != nil {
		t.Fatalf("Load of the root beside its loaded child: %v", err)
	}
	if c1.Events()[c1.Len()-1].Type != session.TypeTurnEnd {
		t.Error("the child's interrupted turn was not closed")
	}
	appendTurn(t, c1, 2)
	appendTurn(t, r, 3)
	flush(t, c1)
	flush(t, r)
	// The resumed child's new child goes to the same file.
	n, detachN, err := st.Create(session.CreateOptions{ID: "n", Cwd: "/w", ParentSession: "c1", Origin: session.OriginSubagent, DelegationDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, n, 1)
	wantC1, wantRoot, wantN := c1.Events(), r.Events(), n.Events()
	if err := errors.Join(detachRoot(), detachN(), detachC1()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(tr.rootDir, "n.jsonl")); err != nil || !os.SameFile(fi, rootInfo) {
		t.Errorf("a resumed child's child is not in the root's file: %v", err)
	}
	for id, w := range map[string][]session.Event{"c1": wantC1, "root": wantRoot, "c2": want["c2"], "g": want["g"], "n": wantN} {
		if _, got := load(t, root, id); !cmp.Equal(w, got) {
			t.Errorf("%s after the resumed writes: %d events, want %d", id, len(got), len(w))
		}
	}
	if fi, err := os.Stat(filepath.Join(tr.rootDir, "c1.jsonl")); err != nil || !os.SameFile(fi, rootInfo) {
		t.Errorf("the resumed child's name no longer links the root's file: %v", err)
	}
}

// A crash after a child's name was linked but before its lines reached the
// disk (a system crash: the lines are written first, then the name linked)
// leaves a name with no header inside: reading and loading it say so,
// naming the file; the listing skips it; its root is untouched.
func TestChildNameWithoutItsLines(t *testing.T) {
	root := t.TempDir()
	h, want := store(t, root, session.CreateOptions{ID: "root", Cwd: "/w"}, func(s *session.Session) { appendTurn(t, s, 1) })
	rootFile := New(root).Path(h)
	ghost := filepath.Join(filepath.Dir(rootFile), "ghost"+Ext)
	if err := os.Link(rootFile, ghost); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(rootFile)
	_, _, _, err := New(root).Read("ghost")
	wantCode(t, err, session.CodeCorrupt, ghost, `no header record of "ghost"`)
	_, _, _, err = New(root).Load("ghost")
	wantCode(t, err, session.CodeCorrupt, ghost, `no header record of "ghost"`)
	hs, err := New(root).List()
	if err != nil || len(hs) != 1 || hs[0].ID != "root" {
		t.Errorf("List = %v, %v; want only the root", hs, err)
	}
	if after, _ := os.ReadFile(rootFile); !bytes.Equal(before, after) {
		t.Error("a refused load changed the file")
	}
	if _, got := load(t, root, "root"); !cmp.Equal(want, got) {
		t.Error("the root does not load beside a name without lines")
	}
	_, err = New(root).Create(session.Header{ID: "ghost", Cwd: "/w"})
	wantCode(t, err, session.CodeExists, "ghost")
}

// closedTree writes the tree of newTree and closes it; it returns the
// sessions' events and the root's file.
func closedTree(t *testing.T, root string) (map[string][]session.Event, string) {
	t.Helper()
	tr := newTree(t, root)
	want := map[string][]session.Event{}
	for id, s := range tr.s {
		want[id] = s.Events()
	}
	tr.closeAll(t)
	return want, filepath.Join(tr.rootDir, "root"+Ext)
}

// The torn last line a crash leaves is any session's: whichever session of
// the file a writer loads cuts it, a reader leaves it, and every session
// still reads.
func TestTornLastLineOfAnySessionInAFile(t *testing.T) {
	for _, tail := range []string{`{"sid":"c2","type":"step/sta`, `{"sid":"c`, `{"type":"turn/start","seq":`, "{\"sid\":\"g\",\"type\":\"x\"}}\n"} {
		for _, loader := range []string{"root", "c1"} {
			t.Run(fmt.Sprintf("%q by %s", tail, loader), func(t *testing.T) {
				root := t.TempDir()
				want, rootFile := closedTree(t, root)
				intact, _ := os.ReadFile(rootFile)
				os.WriteFile(rootFile, append(bytes.Clone(intact), tail...), 0o600)
				for _, id := range treeIDs {
					if _, got, live, err := New(root).Read(id); err != nil || live || !cmp.Equal(want[id], got) {
						t.Fatalf("Read %s past a torn line: %d events, live %v, %v", id, len(got), live, err)
					}
				}
				_, got, p, err := New(root).Load(loader)
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
				if !cmp.Equal(want[loader], got) {
					t.Errorf("Load %s: %d events, want %d", loader, len(got), len(want[loader]))
				}
				if after, _ := os.ReadFile(rootFile); !bytes.Equal(after, intact) {
					t.Errorf("the torn line was not cut: %d bytes, want %d", len(after), len(intact))
				}
			})
		}
	}
}

// Tagged lines whose session has no name (a process crashed between
// writing a child's first lines and linking its name) belong to no
// listed session; should the id be used again in the file, the session is
// its last header's lines.
func TestTaggedLinesWithoutAName(t *testing.T) {
	root := t.TempDir()
	want, rootFile := closedTree(t, root)
	if err := os.Remove(filepath.Join(filepath.Dir(rootFile), "c2"+Ext)); err != nil {
		t.Fatal(err)
	}
	hs, err := New(root).List()
	if err != nil || len(hs) != 3 || slices.ContainsFunc(hs, func(h session.Header) bool { return h.ID == "c2" }) {
		t.Errorf("List = %v, %v; want root, c1 and g", hs, err)
	}
	_, _, _, err = New(root).Read("c2")
	wantCode(t, err, session.CodeNotFound, "c2")
	for _, id := range []string{"root", "c1", "g"} {
		if _, got, _, err := New(root).Read(id); err != nil || !cmp.Equal(want[id], got) {
			t.Errorf("%s: %d events, want %d", id, len(got), len(want[id]))
		}
	}

	// c2 again, a child of the resumed root: its lines are its new header's.
	st := session.NewStore(New(root), nil)
	r, detachRoot, err := st.Load(context.Background(), "root")
	if err != nil {
		t.Fatal(err)
	}
	defer detachRoot()
	if r.Header().ID != "root" {
		t.Fatalf("loaded %s", r.Header().ID)
	}
	c2, detach, err := st.Create(session.CreateOptions{ID: "c2", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, c2, 1)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(bytes.Join(bytesLines(t, rootFile), nil)), `{"sid":"c2","type":"session",`); n != 2 {
		t.Fatalf("%d headers of c2 in the file, want 2", n)
	}
	if _, got, _, err := New(root).Read("c2"); err != nil || !cmp.Equal(c2.Events(), got) {
		t.Errorf("Read of the new c2: %d events (want %d), %v", len(got), c2.Len(), err)
	}
}

func bytesLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))
}

// A child whose parent another process writes gets a file of its own; that
// process's children are busy for every other writer, and live to readers.
func TestChildOfAParentWrittenElsewhere(t *testing.T) {
	root := t.TempDir()
	tr := newTree(t, root)
	defer tr.closeAll(t)
	other := New(root)
	for _, id := range treeIDs {
		_, _, _, err := other.Load(id)
		wantCode(t, err, session.CodeBusy, "live process")
	}
	h, _ := store(t, root, session.CreateOptions{ID: "b1", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent,
		DelegationDepth: 1}, func(s *session.Session) { appendTurn(t, s, 1) })
	own, _ := os.Stat(New(root).Path(h))
	rootInfo, _ := os.Stat(filepath.Join(tr.rootDir, "root"+Ext))
	if own == nil || os.SameFile(own, rootInfo) {
		t.Fatal("a child of a parent written by another process went into the parent's file")
	}
	// Another project directory: a file of its own too.
	tr2 := session.NewStore(tr.b, nil)
	s, detach, err := tr2.Create(session.CreateOptions{ID: "wt", Cwd: "/elsewhere", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, s, 1)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tr.b.Path(s.Header())); err != nil || os.SameFile(fi, rootInfo) {
		t.Errorf("a child in another project directory: %v, or it went into its parent's file", err)
	}
	if hs, err := New(root).List(); err != nil || len(hs) != 6 {
		t.Errorf("List: %d sessions, %v; want 6", len(hs), err)
	}
}

// A failed write of a child's first lines, or a name another process took
// first, leaves the shared file as it was, and every session of it goes on.
func TestChildPublicationFailures(t *testing.T) {
	root := t.TempDir()
	b := New(root)
	var fail bool
	failAfter(b, &fail)
	_, r, detachRoot := newRoot(t, b)
	defer detachRoot()
	appendTurn(t, r, 1)
	flush(t, r)
	rootFile := b.Path(r.Header())
	intact := fileSize(t, rootFile)

	events := memLog(t, func(s *session.Session) { appendTurn(t, s, 1) })
	c, err := b.Create(session.Header{ID: "c", Cwd: "/w", ParentSession: "root", CreatedAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := c.Append(events[:4]); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Append = %v, want the write error", err)
	}
	fail = false
	if got := fileSize(t, rootFile); got != intact {
		t.Errorf("a failed write of a child's first lines left %d bytes, want %d", got, intact)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(rootFile), "c"+Ext)); err == nil {
		t.Error("a child whose first write failed has a name")
	}
	if err := c.Append(events[:4]); err != nil { // the next Append publishes it
		t.Fatal(err)
	}
	fail = true
	if err := c.Append(events[4:]); err == nil {
		t.Fatal("a failed write reported no error")
	}
	fail = false
	if err := c.Append(events[4:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if a, b := fileSize(t, rootFile), fileSize(t, filepath.Join(filepath.Dir(rootFile), "c"+Ext)); a != b {
		t.Errorf("c's name is not a link to its parent's file (%d and %d bytes)", a, b)
	}
	if _, got, _, err := New(root).Read("c"); err != nil || !cmp.Equal(events, got) {
		t.Fatalf("Read c after failed writes: %d events, %v", len(got), err)
	}

	// Another process takes the name first: CodeExists, the shared file cut back.
	p, err := b.Create(session.Header{ID: "taken", Cwd: "/w", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	store(t, root, session.CreateOptions{ID: "taken", Cwd: "/w"}, func(s *session.Session) { appendTurn(t, s, 1) })
	intact = fileSize(t, rootFile)
	wantCode(t, p.Append([]session.Event{{Type: "todo/write", Data: []byte(`{}`)}}), session.CodeExists, "taken")
	if got := fileSize(t, rootFile); got != intact {
		t.Errorf("a refused child left %d bytes in its parent's file, want %d", got, intact)
	}
	appendTurn(t, r, 2)
	flush(t, r)
	if _, got, _, err := New(root).Read("root"); err != nil || !cmp.Equal(r.Events(), got) {
		t.Errorf("the root after its children's failures: %d events, %v", len(got), err)
	}
}

// Children of one root write into its file at once: each batch is whole.
func TestConcurrentChildrenInOneFile(t *testing.T) {
	root := t.TempDir()
	st, r, detachRoot := newRoot(t, New(root))
	appendTurn(t, r, 1)
	flush(t, r)
	const n = 16
	want := make([][]session.Event, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, detach, err := st.Create(session.CreateOptions{ID: fmt.Sprint("c", i), Cwd: "/w", ParentSession: "root",
				Origin: session.OriginSubagent, DelegationDepth: 1})
			if err != nil {
				t.Error(err)
				return
			}
			for turn := 1; turn <= 3; turn++ {
				appendTurn(t, s, turn)
				if err := s.Flush(); err != nil {
					t.Error(err)
				}
			}
			want[i] = s.Events()
			if err := detach(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := detachRoot(); err != nil {
		t.Fatal(err)
	}
	rootInfo, _ := os.Stat(New(root).Path(r.Header()))
	for i := range n {
		id := fmt.Sprint("c", i)
		if fi, err := os.Stat(filepath.Join(root, ProjectKey("/w"), id+Ext)); err != nil || !os.SameFile(fi, rootInfo) {
			t.Errorf("%s is not in the root's file: %v", id, err)
		}
		if _, got, _, err := New(root).Read(id); err != nil || !cmp.Equal(want[i], got) {
			t.Errorf("%s: %d events, want %d: %v", id, len(got), len(want[i]), err)
		}
	}
}

// A file holding many sessions and long lines is listed in one pass: the
// bytes List reads stay near the file's size, not the size times its
// names.
func TestListReadsAFileOnce(t *testing.T) {
	rchar := func() int64 {
		b, err := os.ReadFile("/proc/self/io")
		if err != nil {
			t.Skip("no /proc/self/io")
		}
		var n int64
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "rchar: "); ok {
				fmt.Sscan(v, &n)
			}
		}
		return n
	}
	rchar()
	root := t.TempDir()
	st, r, detachRoot := newRoot(t, New(root))
	const n = 50
	for i := range n {
		s, detach, err := st.Create(session.CreateOptions{ID: fmt.Sprint("c", i), Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s, session.TypeUserMessage, content.UserText(strings.Repeat("long line ", 20_000))) // 200 KB
		if err := detach(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			mustAppend(t, r, session.TypeUserMessage, content.UserText("the root after its first child"))
			flush(t, r)
		}
	}
	if err := detachRoot(); err != nil {
		t.Fatal(err)
	}
	size := fileSize(t, New(root).Path(r.Header()))
	before := rchar()
	hs, err := New(root).List()
	read := rchar() - before
	if err != nil || len(hs) != n+1 {
		t.Fatalf("List: %d sessions, %v", len(hs), err)
	}
	t.Logf("a %d KB file with %d sessions: List read %d KB", size>>10, n+1, read>>10)
	if read > size+size/4 {
		t.Errorf("List read %d bytes of a %d-byte file", read, size)
	}
}

// A child whose parent's name is gone (removed while the parent writes)
// gets a file of its own, its long texts stored in it.
func TestChildOfAParentWhoseNameIsGone(t *testing.T) {
	root := t.TempDir()
	st, r, detachRoot := newRoot(t, New(root))
	defer detachRoot()
	appendTurn(t, r, 1)
	flush(t, r)
	if err := os.Remove(New(root).Path(r.Header())); err != nil {
		t.Fatal(err)
	}
	c, detach, err := st.Create(session.CreateOptions{ID: "c", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, c, session.TypeTurnStart, session.TurnStart{Turn: 1})
	appendBigStep(t, c, 1, 1, session.MinShared, session.MinShared+64, session.MinShared/2)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if ls := lines(t, filepath.Join(root, ProjectKey("/w"), "c"+Ext)); !strings.HasPrefix(ls[0], `{"type":"session",`) {
		t.Errorf("c's file starts %.60s, want its own header", ls[0])
	}
	if _, got, _, err := New(root).Read("c"); err != nil || !cmp.Equal(c.Events(), got) {
		t.Errorf("Read c: %d events, %v", len(got), err)
	}
}

// Long texts stored once stay per session in a shared file: a child's
// references resolve within its own lines, its parent's within the
// parent's, with their steps interleaved.
func TestBigTextsOfSessionsInOneFile(t *testing.T) {
	root := t.TempDir()
	st, r, detachRoot := newRoot(t, New(root))
	mustAppend(t, r, session.TypeTurnStart, session.TurnStart{Turn: 1})
	flush(t, r)
	c, detach, err := st.Create(session.CreateOptions{ID: "c", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, c, session.TypeTurnStart, session.TurnStart{Turn: 1})
	for step := 1; step <= 2; step++ {
		appendBigStep(t, r, 1, step, session.MinShared+step, session.MinShared+64, session.MinShared/3)
		appendBigStep(t, c, 1, step, session.MinShared+2*step, session.MinShared+80, session.MinShared/2)
	}
	if err := errors.Join(detach(), detachRoot()); err != nil {
		t.Fatal(err)
	}
	path := New(root).Path(r.Header())
	if got, text := fileSize(t, path), 8*session.MinShared; got > int64(2*text) {
		t.Errorf("the file is %d bytes for %d bytes of long texts", got, text)
	}
	for id, want := range map[string][]session.Event{"root": r.Events(), "c": c.Events()} {
		if _, got, _, err := New(root).Read(id); err != nil || !cmp.Equal(want, got) {
			t.Errorf("Read %s: %d events (want %d), %v", id, len(got), len(want), err)
		}
	}
	if hs, err := New(root).List(); err != nil || len(hs) != 2 {
		t.Errorf("List: %v, %v", hs, err)
	}
}

// A link the file system refuses (a file at its link limit, EMLINK; a
// file system without hard links) gives the child a file of its own; a
// name taken meanwhile is CodeExists.
func TestChildLinkRefused(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMLINK, syscall.EPERM, syscall.EEXIST} {
		t.Run(errno.Error(), func(t *testing.T) {
			root := t.TempDir()
			b := New(root)
			st, r, detachRoot := newRoot(t, b)
			defer detachRoot()
			appendTurn(t, r, 1)
			flush(t, r)
			rootFile := b.Path(r.Header())
			intact := fileSize(t, rootFile)
			b.link = func(oldname, newname string) error {
				if oldname == rootFile {
					return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errno}
				}
				return os.Link(oldname, newname)
			}
			c, detach, err := st.Create(session.CreateOptions{ID: "c", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
			if err != nil {
				t.Fatal(err)
			}
			appendTurn(t, c, 1)
			err = detach()
			if got := fileSize(t, rootFile); got != intact {
				t.Errorf("the refused link left %d bytes in the parent's file, want %d", got, intact)
			}
			if errno == syscall.EEXIST {
				wantCode(t, err, session.CodeExists, "c")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			own, _ := os.Stat(filepath.Join(filepath.Dir(rootFile), "c"+Ext))
			if rootInfo, _ := os.Stat(rootFile); own == nil || os.SameFile(own, rootInfo) {
				t.Fatal("the child has no file of its own")
			}
			if _, got, _, err := New(root).Read("c"); err != nil || !cmp.Equal(c.Events(), got) {
				t.Errorf("Read c: %d events, %v", len(got), err)
			}
		})
	}
}

// newRoot returns a store over b and a new root session "root" in /w.
func newRoot(t *testing.T, b *Backend) (*session.Store, *session.Session, func() error) {
	t.Helper()
	st := session.NewStore(b, nil)
	r, detach, err := st.Create(session.CreateOptions{ID: "root", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	return st, r, detach
}
