//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package jsonl

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/session"
	"github.com/google/go-cmp/cmp"
)

// holdWriterLock takes path's writer lock through a file description of its
// own, as a dsh process writing the session would, and appends tail to the
// file as a write in progress. release drops the lock (the process ended).
func holdWriterLock(t *testing.T, path, tail string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockWriter(f); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(tail); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// snapshot is what a reader must leave unchanged.
type snapshot struct {
	data  []byte
	mtime time.Time
}

func snap(t *testing.T, path string) snapshot {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{data, fi.ModTime()}
}

// A reader opens the file read-only and changes nothing. While a live
// writer holds the session, the line it is writing is left out and the open
// turn stays open (running); a writer's Load is refused. Once the writer is
// gone, the torn line is left out and the turn closed, in memory only; the
// next writer's Load repairs the file.
func TestReaderNeverWritesAndRespectsALiveWriter(t *testing.T) {
	for _, tail := range []string{
		`{"type":"step/end","seq":`,                                       // half a line
		`{"type":"step/end","seq":5,"time":0,"data":{"turn":1,"step":1}}`, // a whole line whose newline is not written yet
	} {
		t.Run(tail[:20], func(t *testing.T) {
			root := t.TempDir()
			h, stored := store(t, root, session.CreateOptions{ID: "live"}, func(s *session.Session) { appendOpenTurn(t, s, 1) })
			path := New(root).Path(h)
			release := holdWriterLock(t, path, tail)
			before := snap(t, path)

			_, events, live, err := New(root).Read("live")
			if err != nil || !live {
				t.Fatalf("Read of a live session: live %v, %v", live, err)
			}
			if diff := cmp.Diff(stored, events); diff != "" {
				t.Errorf("live read (-stored +read):\n%s", diff)
			}
			_, shown, err := session.NewStore(New(root), nil).Read("live")
			if err != nil || len(shown) != len(stored) {
				t.Errorf("Store.Read of a live session: %d events (want %d: the turn is running), %v", len(shown), len(stored), err)
			}
			_, _, _, err = New(root).Load("live")
			wantCode(t, err, session.CodeBusy, path)
			if after := snap(t, path); !bytes.Equal(after.data, before.data) || !after.mtime.Equal(before.mtime) {
				t.Fatal("a reader or a refused writer changed the file")
			}

			release() // the writer dies
			_, events, live, err = New(root).Read("live")
			if err != nil || live {
				t.Fatalf("Read after the writer died: live %v, %v", live, err)
			}
			if tail[len(tail)-1] == '}' { // a complete record survives its writer
				stored = append(stored, session.Event{Seq: 5, Type: session.TypeStepEnd, Data: session.Step{Turn: 1, Step: 1}})
			}
			if diff := cmp.Diff(stored, events); diff != "" {
				t.Errorf("read after the writer died (-want +got):\n%s", diff)
			}
			_, shown, err = session.NewStore(New(root), nil).Read("live")
			if err != nil || shown[len(shown)-1].Type != session.TypeTurnEnd {
				t.Errorf("Store.Read did not close the interrupted turn: %v", err)
			}
			if after := snap(t, path); !bytes.Equal(after.data, before.data) {
				t.Fatal("a reader changed the file of a dead writer")
			}
			_, repaired := load(t, root, "live")
			if diff := cmp.Diff(shown, repaired); diff != "" {
				t.Errorf("the writer's repair and the reader's view differ (-read +load):\n%s", diff)
			}
		})
	}
}

// A file appears only whole: header and first batch, under its writer's
// lock, with no temporary file left beside it.
func TestFileAppearsWholeAndLocked(t *testing.T) {
	root := t.TempDir()
	st := session.NewStore(New(root), nil)
	s, detach, err := st.Create(session.CreateOptions{ID: "w", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	path := New(root).Path(s.Header())
	appendOpenTurn(t, s, 1)
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the file exists before the first flush")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, events, live, err := New(root).Read("w"); err != nil || !live || len(events) != s.Len() {
		t.Fatalf("Read: %d events, live %v, %v", len(events), live, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the session's directory holds %d entries, want only %s", len(entries), FileName)
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if _, _, live, err := New(root).Read("w"); err != nil || live {
		t.Fatalf("Read after detach: live %v, %v", live, err)
	}
}
