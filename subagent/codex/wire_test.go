package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/subagent/childproc"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

// transcripts are real stdout of codex 0.171.0 app-server (one turn each,
// against a loopback Responses mock), captured for the reader's tests.
func transcripts(t testing.TB) map[string][]byte {
	paths, err := filepath.Glob("testdata/codex-*.jsonl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// threadOf is the thread id of a transcript's thread/start answer.
func threadOf(t testing.TB, data []byte) string {
	r := newReader(bytes.NewReader(data), MaxLine)
	for {
		m, err := r.next()
		if err != nil {
			t.Fatalf("no thread/start answer: %v", err)
		}
		if string(m.ID) == "1" {
			var res struct {
				Thread struct{ ID string } `json:"thread"`
			}
			if err := json.Unmarshal(m.Result, &res); err != nil || res.Thread.ID == "" {
				t.Fatalf("thread/start answer %s: %v", m.Result, err)
			}
			return res.Thread.ID
		}
	}
}

// replay feeds a transcript read by r to a turn state as the connection
// would, until r fails.
func replay(r *reader, data []byte, s *turnState) (turn *turnInfo, err error) {
	for i := 0; ; i++ {
		if i > len(data)+1 {
			return nil, errors.New("the reader makes no progress")
		}
		m, err := r.next()
		if err != nil {
			return turn, err
		}
		switch m.kind() {
		case kindNotification:
			s.notify(m.Method, m.Params)
			select {
			case t := <-s.completed:
				turn = &t
			default:
			}
		case kindRequest:
			s.request(m.Method, m.Params)
		case kindResponse:
			m.intID()
		}
	}
}

func TestRealTranscripts(t *testing.T) {
	for name, want := range map[string]subagent.Result{
		"codex-0.171.0-answer.jsonl":    {StopReason: subagent.Completed, Output: []content.Block{content.Text("PONG answer")}},
		"codex-0.171.0-fail.jsonl":      {StopReason: subagent.Failed},
		"codex-0.171.0-interrupt.jsonl": {StopReason: subagent.Failed},
	} {
		t.Run(name, func(t *testing.T) {
			data := transcripts(t)[name]
			s := newTurnState(PermissionNever, nil, nil)
			s.setThread(threadOf(t, data))
			turn, err := replay(newReader(bytes.NewReader(data), MaxLine), data, s)
			if err != io.EOF || turn == nil {
				t.Fatalf("replay: %v, turn %v", err, turn)
			}
			got := s.outcome(*turn)
			if got.StopReason != want.StopReason || content.JoinText(got.Output) != content.JoinText(want.Output) {
				t.Fatalf("outcome %+v, want %+v", got, want)
			}
			if name == "codex-0.171.0-fail.jsonl" && !strings.Contains(got.Diagnostic, "category other") {
				t.Errorf("diagnostic %q", got.Diagnostic)
			}
			if name == "codex-0.171.0-answer.jsonl" && s.totalUsage() != (content.Usage{Input: 8, CacheRead: 3, Output: 5, Reasoning: 1}) {
				t.Errorf("usage %+v", s.totalUsage())
			}
		})
	}
}

func TestReaderLines(t *testing.T) {
	in := "\n  \r\n" + `{"id":0,"result":{}}` + "\r\n" + `{"method":"x"}` + "\n" + `{"id":"s","method":"y","params":{}}`
	r := newReader(strings.NewReader(in), 64)
	var kinds []kind
	for {
		m, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, m.kind())
	}
	if len(kinds) != 3 || kinds[0] != kindResponse || kinds[1] != kindNotification || kinds[2] != kindRequest {
		t.Fatalf("kinds %v", kinds)
	}
	for in, want := range map[string]any{
		strings.Repeat("x", 65) + "\n": &childproc.LineTooLongError{},
		"[1,2]\n":                      &ProtocolError{},
		`{"id":null}` + "\n":           &ProtocolError{},
		`{"result":1}`:                 &ProtocolError{},
	} {
		_, err := newReader(strings.NewReader(in), 64).next()
		switch want.(type) {
		case *childproc.LineTooLongError:
			var e *childproc.LineTooLongError
			if !errors.As(err, &e) {
				t.Errorf("%q: %v", in, err)
			}
		case *ProtocolError:
			var e *ProtocolError
			if !errors.As(err, &e) {
				t.Errorf("%q: %v", in, err)
			}
		}
	}
	// Exactly the limit passes.
	if _, err := newReader(strings.NewReader(`{"method":"`+strings.Repeat("x", 64-13)+`"}`), 64).next(); err != nil {
		t.Errorf("a line of exactly the limit: %v", err)
	}
}

func TestAnswerSelection(t *testing.T) {
	final, commentary, partial := phaseFinal, phaseCommentary, "partial_answer"
	for _, tc := range []struct {
		msgs  []agentMessage
		items []wireItem
		want  string
	}{
		{msgs: []agentMessage{{"a", phaseFinal}, {"b", ""}, {"c", phaseCommentary}}, want: "a"},
		{msgs: []agentMessage{{"a", ""}, {"b", ""}, {"c", phaseCommentary}}, want: "b"},
		{msgs: []agentMessage{{"a", phaseFinal}, {" ", phaseFinal}}, want: "a"},
		{msgs: []agentMessage{{"c", phaseCommentary}, {"p", "partial_answer"}}, want: ""},
		{items: []wireItem{{Type: "agentMessage", Text: "x", Phase: &final}, {Type: "agentMessage", Text: "y", Phase: &commentary}}, want: "x"},
		{items: []wireItem{{Type: "agentMessage", Text: "p", Phase: &partial}, {Type: "agentMessage", Text: "n"}}, want: "n"},
	} {
		got, ok := answer(tc.msgs, tc.items)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("answer(%v, %v) = %q, %v; want %q", tc.msgs, tc.items, got, ok, tc.want)
		}
	}
}
