package session

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
)

// A compaction replaces the derived history by its summary and the kept
// messages; the log round-trips through JSON, and a session seeded with
// it (a resume, a fork) derives the same history and size.
func TestCompactionDerivesHistory(t *testing.T) {
	st := NewStore(nil, nil)
	s, _, err := st.Create(CreateOptions{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two", "three", "four"} {
		s.Append(TypeUserMessage, content.UserText(text))
	}
	summary := content.UserText("SUMMARY")
	s.Append(TypeCompaction, Compaction{Trigger: CompactManual, Summary: summary, Kept: 1, Compacted: 3,
		Children: []string{"c1"}, Usage: &content.Usage{Input: 9}})
	s.Append(TypeUserMessage, content.UserText("five"))
	want := []string{"SUMMARY", "four", "five"}
	check := func(s *Session) {
		t.Helper()
		var got []string
		var size int64
		for _, m := range s.Messages() {
			got = append(got, content.JoinText(m.Content))
			size += MessageSize(m)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") || s.MessageBytes() != size {
			t.Errorf("history %q, size %d (want %d)", got, s.MessageBytes(), size)
		}
	}
	check(s)
	var seed []Event
	for _, e := range s.Events() {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if back.Ignorable {
			t.Errorf("%s is ignorable: a reader that skips it derives another history", back.Type)
		}
		seed = append(seed, back)
	}
	r, _, err := st.Create(CreateOptions{ID: "b", Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	check(r)
}

// A compaction that claims to keep more than there is keeps everything
// (a hand-edited log cannot make the loader panic); an unknown required
// event type is still refused.
func TestCompactionBadKept(t *testing.T) {
	s := newSession(Header{ID: "x"}, nil)
	s.Append(TypeUserMessage, content.UserText("one"))
	s.Append(TypeCompaction, Compaction{Summary: content.UserText("S"), Kept: 99})
	s.Append(TypeCompaction, Compaction{Summary: content.UserText("T"), Kept: -3})
	if n := len(s.Messages()); n != 1 || content.JoinText(s.Messages()[0].Content) != "T" {
		t.Errorf("%d messages", n)
	}
	var e Event
	err := json.Unmarshal([]byte(`{"type":"compaction/other","seq":0,"time":1,"data":{}}`), &e)
	if !errors.Is(err, &Error{Code: CodeUnknownEvent}) {
		t.Errorf("unknown required type: %v", err)
	}
}
