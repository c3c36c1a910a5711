package session

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReplicate(t *testing.T) {
	ref := newSession(Header{ID: "src"}, nil)
	appendTurn(t, ref, 1)
	appendOpenTurn(t, ref, 2)
	src := ref.Events()
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	h := Header{ID: "remote-child", ParentSession: "parent", Origin: OriginSubagent, DelegationDepth: 2, Cwd: "/work"}
	s, add, detach, err := st.Replicate(h)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := st.Get("remote-child"); !ok || got != s {
		t.Fatal("the replica is not live in the store")
	}
	var seen []int64
	s.Observe(func(e Event) { seen = append(seen, e.Seq) })
	half := len(src) / 2
	if err := add(src[:half]); err != nil {
		t.Fatal(err)
	}
	// A batch that does not continue the log is refused whole.
	wantCode(t, add(src[half+1:]), CodeCorrupt)
	if err := add(src[half:]); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(src, s.Events()); diff != "" {
		t.Errorf("replica differs from its source (-want +got):\n%s", diff)
	}
	if len(seen) != len(src) || seen[len(seen)-1] != int64(len(src)-1) {
		t.Errorf("observers saw seqs %v, want 0..%d", seen, len(src)-1)
	}
	if diff := cmp.Diff(ref.Messages(), s.Messages()); s.LastTurn() != 2 || diff != "" {
		t.Errorf("derived state: turn %d, messages (-want +got):\n%s", s.LastTurn(), diff)
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, add(nil), CodeClosed)
	gotH, stored, live, err := backend.Read("remote-child")
	if err != nil {
		t.Fatal(err)
	}
	if live || gotH != h {
		t.Errorf("stored header %+v (live %v), want %+v", gotH, live, h)
	}
	if diff := cmp.Diff(src, stored); diff != "" {
		t.Errorf("stored log differs (-want +got):\n%s", diff)
	}
	// Loading it later repairs the open turn, as for any interrupted session.
	loaded, detachLoaded, err := st.Load(t.Context(), "remote-child")
	if err != nil {
		t.Fatal(err)
	}
	defer detachLoaded()
	if err := CheckBalanced(loaded.Events()); err != nil {
		t.Errorf("loaded replica is not balanced: %v", err)
	}
}

func TestReplicateRefusesBadHeadersAndDuplicates(t *testing.T) {
	st := NewStore(nil, nil)
	if _, _, _, err := st.Replicate(Header{ID: "x", Cwd: "relative"}); err == nil {
		t.Error("a relative cwd was accepted")
	}
	_, _, detach, err := st.Replicate(Header{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if _, _, _, err := st.Replicate(Header{ID: "x"}); err == nil {
		t.Error("a second live replica of one id was accepted")
	}
}
