package jsonl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/session"
	"github.com/google/go-cmp/cmp"
)

// FuzzLoad writes the input after a valid header line and loads it: Load
// must not panic or hang, and must either refuse with a coded error or
// return a log that Repair accepts; the repaired log then persists and
// reloads unchanged. Read sees the same log first, without changing a byte.
// Texts stored once are restored, or their references refused as corrupt.
func FuzzLoad(f *testing.F) {
	var body bytes.Buffer
	for _, e := range memLog(f, func(s *session.Session) { appendTurn(f, s, 1); appendOpenTurn(f, s, 2) }) {
		line, err := e.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		body.Write(append(line, '\n'))
	}
	// A log whose long texts are stored once (session.Compactor).
	var shared bytes.Buffer
	var compact session.Compactor
	for _, e := range memLog(f, func(s *session.Session) {
		mustAppend(f, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
		appendBigStep(f, s, 1, 1, session.MinShared, session.MinShared+64, session.MinShared/2)
	}) {
		line, err := compact.Compact(e).MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		shared.Write(append(line, '\n'))
	}
	for _, seed := range []string{
		body.String(),
		shared.String(),
		body.String()[:body.Len()-9],
		"",
		"\n",
		`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}`,
		`{"type":"x/y","seq":0,"time":0,"data":[],"ignorable":true}` + "\n" + `{"type":"turn/end","seq":1,"time":0,"data":{}}`,
		`{"type":"step/start","seq":0,"time":0,"data":null}` + "\n{",
		// Another session's lines inside the file (a child's), one torn.
		`{"sid":"c","type":"session","version":0,"id":"c","createdAt":1,"delegationDepth":1}` + "\n" +
			`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}` + "\n" +
			`{"sid":"c","type":"turn/start","seq":0,"time":0,"data":{"turn":1}}` + "\n" + `{"sid":"c","type":"step/sta`,
	} {
		f.Add([]byte(seed))
	}
	const header = `{"type":"session","version":0,"id":"fz","createdAt":1,"delegationDepth":0}` + "\n"
	b := New(f.TempDir()) // inputs run one at a time; each rewrites the file
	path := b.Path(session.Header{ID: "fz"})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, append([]byte(header), data...), 0o600); err != nil {
			t.Fatal(err)
		}
		_, read, live, readErr := b.Read("fz")
		if on, _ := os.ReadFile(path); !bytes.Equal(on, append([]byte(header), data...)) || live {
			t.Fatalf("Read changed the file or saw a writer (live %v)", live)
		}
		h, events, p, err := b.Load("fz")
		if (err == nil) != (readErr == nil) || !cmp.Equal(read, events) {
			t.Fatalf("Read (%v) and Load (%v) disagree", readErr, err)
		}
		if err != nil {
			if !errors.As(err, new(*session.Error)) {
				t.Fatalf("error without a session code: %v", err)
			}
			return
		}
		if h.ID != "fz" {
			t.Fatalf("header id %q", h.ID)
		}
		repaired, err := session.Repair(events)
		if err != nil {
			t.Fatalf("loaded log fails Repair: %v", err)
		}
		if err := p.Append(repaired[len(events):]); err != nil {
			t.Fatalf("persisting the closers: %v", err)
		}
		p.Close()
		_, again, p, err := b.Load("fz")
		if err != nil {
			t.Fatalf("reload after repair: %v", err)
		}
		p.Close()
		if diff := cmp.Diff(repaired, again); diff != "" {
			t.Fatalf("reload mismatch (-repaired +reloaded):\n%s", diff)
		}
	})
}
