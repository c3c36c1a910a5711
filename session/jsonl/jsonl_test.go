package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustAppend(t testing.TB, s *session.Session, typ string, data any, src ...int64) session.Event {
	t.Helper()
	e, err := s.Append(typ, data, src...)
	if err != nil {
		t.Fatalf("append %s: %v", typ, err)
	}
	return e
}

// appendTurn appends a complete turn: user message, a streamed tool call
// with its result, and a final streamed text answer.
func appendTurn(t testing.TB, s *session.Session, turn int) {
	t.Helper()
	id := fmt.Sprintf("call-%d", turn)
	mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: turn})
	mustAppend(t, s, session.TypeUserMessage, content.UserText(fmt.Sprintf("question %d: é😀 \"quoted\"\nnewline", turn)))
	mustAppend(t, s, session.TypeRequestHeader, session.RequestHeader{Config: session.RequestConfig{Provider: "p", Model: "m"},
		System: "sys", Tools: []content.ToolSpec{{Name: "read", Description: "reads", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Reason: "initial"})
	mustAppend(t, s, session.TypeStepStart, session.Step{Turn: turn, Step: 1})
	var chunks []int64
	for _, c := range []content.Chunk{
		{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeToolCall},
		{Type: content.ChunkToolCallDelta, Index: 0, ID: id, Name: "read", ArgumentsDelta: `{"path":`},
		{Type: content.ChunkToolCallDelta, Index: 0, ArgumentsDelta: `"a"}`},
		{Type: content.ChunkUsage, Usage: &content.Usage{Input: 100, Output: 7}},
		{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishToolCalls}},
	} {
		chunks = append(chunks, mustAppend(t, s, session.TypeAssistantChunk, session.AssistantChunk{Turn: int32(turn), Step: 1, Chunk: c}).Seq)
	}
	mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: turn, Step: 1,
		Message: content.AssistantMessage("p", "m", []content.Block{content.ToolCall(id, "read", `{"path":"a"}`)}),
		Usage:   &content.Usage{Input: 100, Output: 7}}, chunks...)
	call := mustAppend(t, s, session.TypeToolCall, session.ToolCall{Turn: turn, Step: 1, CallID: id, Name: "read", Arguments: `{"path":"a"}`})
	mustAppend(t, s, session.TypeToolResult, session.ToolResult{Turn: turn, Step: 1,
		Message: content.ToolResultMessage(id, []content.Block{content.Text("file\ncontents")}, false),
		Meta:    json.RawMessage(`{"bytes":13}`)}, call.Seq)
	mustAppend(t, s, session.TypeStepEnd, session.Step{Turn: turn, Step: 1})
	mustAppend(t, s, session.TypeStepStart, session.Step{Turn: turn, Step: 2})
	c := mustAppend(t, s, session.TypeAssistantChunk, session.AssistantChunk{Turn: int32(turn), Step: 2,
		Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: "done"}})
	mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: turn, Step: 2,
		Message: content.AssistantMessage("p", "m", []content.Block{content.Text("done")})}, c.Seq)
	mustAppend(t, s, session.TypeStepEnd, session.Step{Turn: turn, Step: 2})
	mustAppend(t, s, session.TypeTurnEnd, session.TurnEnd{Turn: turn, Reason: session.EndReason{Kind: session.EndCompleted}})
}

// appendOpenTurn appends a turn cut off while its first step's tool call
// "a" runs; call "b" never started.
func appendOpenTurn(t testing.TB, s *session.Session, turn int) {
	t.Helper()
	mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: turn})
	mustAppend(t, s, session.TypeUserMessage, content.UserText("go"))
	mustAppend(t, s, session.TypeStepStart, session.Step{Turn: turn, Step: 1})
	mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: turn, Step: 1,
		Message: content.AssistantMessage("p", "m", []content.Block{content.ToolCall("a", "run", `{}`), content.ToolCall("b", "run", `{}`)})})
	mustAppend(t, s, session.TypeToolCall, session.ToolCall{Turn: turn, Step: 1, CallID: "a", Name: "run", Arguments: `{}`})
}

// store returns a session written to a fresh root by build, with its header.
func store(t testing.TB, root string, opts session.CreateOptions, build func(*session.Session)) (session.Header, []session.Event) {
	t.Helper()
	s, detach, err := session.NewStore(New(root), nil).Create(opts)
	if err != nil {
		t.Fatal(err)
	}
	build(s)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	return s.Header(), s.Events()
}

func load(t testing.TB, root, id string) (*session.Session, []session.Event) {
	t.Helper()
	s, detach, err := session.NewStore(New(root), nil).Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	return s, s.Events()
}

func wantCode(t testing.TB, err error, code string, fragments ...string) {
	t.Helper()
	if !errors.Is(err, &session.Error{Code: code}) {
		t.Fatalf("error %v: want code %s", err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

func lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(b), "\n")
}

func writeLines(t testing.TB, path string, ls []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(ls, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	root := t.TempDir()
	parentH, parent := store(t, root, session.CreateOptions{ID: "parent2", Cwd: "/home/ann/proj"}, func(s *session.Session) {
		appendTurn(t, s, 1)
		mustAppend(t, s, "todo/write", json.RawMessage(`{"todos":[{"content":"x","status":"pending"}]}`))
		appendTurn(t, s, 2)
	})
	childOpts := session.CreateOptions{ID: "child", Cwd: "/home/ann/proj", ParentSession: parentH.ID,
		Origin: session.OriginSubagent, DelegationDepth: 1, Seed: session.CompletedPrefix(parent)}
	wantH, want := store(t, root, childOpts, func(s *session.Session) { appendTurn(t, s, s.LastTurn()+1) })

	for _, c := range []struct {
		h      session.Header
		events []session.Event
	}{{parentH, parent}, {wantH, want}} {
		h, events, p, err := New(root).Load(c.h.ID)
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		if diff := cmp.Diff(c.h, h); diff != "" {
			t.Errorf("%s: header mismatch (-want +got):\n%s", c.h.ID, diff)
		}
		if diff := cmp.Diff(c.events, events); diff != "" {
			t.Errorf("%s: events mismatch (-want +got):\n%s", c.h.ID, diff)
		}
	}
	s, events := load(t, root, "child")
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("Store.Load events mismatch (-want +got):\n%s", diff)
	}
	if s.Header().SeedLength != len(childOpts.Seed) || s.LastTurn() != 3 || len(s.Messages()) != 12 {
		t.Errorf("loaded child: header %+v, last turn %d, %d messages", s.Header(), s.LastTurn(), len(s.Messages()))
	}
}

// The usage a tool result carries (a child's) survives the file, next to
// its meta; a result logged before the typed field, with the usage inside
// its meta (subagentUsage), still loads, meta intact and no usage.
func TestToolResultUsageRoundTrip(t *testing.T) {
	root := t.TempDir()
	usage := map[string]content.Usage{"p/m": {Input: 30, Output: 12, CacheRead: 4}, "q/n": {Input: 1, Output: 1, Reasoning: 2}}
	old := json.RawMessage(`{"subagentUsage":{"p/m":{"inputTokens":3,"outputTokens":2}},"subagentChild":"c1","subagentProvider":"spawn"}`)
	results := []session.ToolResult{
		{Turn: 1, Step: 1, Message: content.ToolResultMessage("a", []content.Block{content.Text("child said")}, false),
			Meta: json.RawMessage(`{"subagentChild":"c2","subagentProvider":"spawn"}`), Usage: usage},
		{Turn: 1, Step: 1, Message: content.ToolResultMessage("b", []content.Block{content.Text("before")}, false), Meta: old},
	}
	h, want := store(t, root, session.CreateOptions{ID: "usage"}, func(s *session.Session) {
		mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
		mustAppend(t, s, session.TypeStepStart, session.Step{Turn: 1, Step: 1})
		mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: 1, Step: 1,
			Message: content.AssistantMessage("p", "m", []content.Block{content.ToolCall("a", "subagent", `{}`), content.ToolCall("b", "subagent", `{}`)})})
		for _, r := range results {
			id := r.Message.Content[0].ToolCallID
			call := mustAppend(t, s, session.TypeToolCall, session.ToolCall{Turn: 1, Step: 1, CallID: id, Name: "subagent", Arguments: `{}`})
			mustAppend(t, s, session.TypeToolResult, r, call.Seq)
		}
		mustAppend(t, s, session.TypeStepEnd, session.Step{Turn: 1, Step: 1})
		mustAppend(t, s, session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}})
	})
	stored := strings.Join(lines(t, New(root).Path(h)), "")
	if n := strings.Count(stored, `"usage":`); n != 1 || !strings.Contains(stored, `"usage":{"p/m":{"inputTokens":30,`) {
		t.Fatalf("stored lines (%d usage fields):\n%s", n, stored)
	}
	_, events := load(t, root, h.ID)
	if diff := cmp.Diff(want, events); diff != "" {
		t.Fatalf("events mismatch (-want +got):\n%s", diff)
	}
	var got []session.ToolResult
	for _, e := range events {
		if r, ok := e.Data.(session.ToolResult); ok {
			got = append(got, r)
		}
	}
	if diff := cmp.Diff(results, got); diff != "" {
		t.Errorf("tool results mismatch (-want +got):\n%s", diff)
	}
}

// A session must stay loadable whatever its owner appended.
func TestAppendedPluginTypeIsLoadable(t *testing.T) {
	root := t.TempDir()
	store(t, root, session.CreateOptions{ID: "p"}, func(s *session.Session) {
		mustAppend(t, s, "plugin/note", json.RawMessage(`{"n":1}`))
	})
	load(t, root, "p")
}

func TestFileLayout(t *testing.T) {
	root := t.TempDir()
	h, events := store(t, root, session.CreateOptions{ID: "s/1", Cwd: "/w/my proj"}, func(s *session.Session) { appendTurn(t, s, 1) })
	path := filepath.Join(root, "--w-my~0020proj--", "s~002F1.jsonl")
	if got := New(root).Path(h); got != path {
		t.Errorf("Path = %s, want %s", got, path)
	}
	ls := lines(t, path)
	if len(ls) != len(events)+2 || ls[len(ls)-1] != "" {
		t.Fatalf("file has %d lines (last %q), want a header, %d events and a final newline", len(ls), ls[len(ls)-1], len(events))
	}
	wantHeader := fmt.Sprintf(`{"type":"session","version":0,"id":"s/1","createdAt":%d,"cwd":"/w/my proj","delegationDepth":0}`+"\n", h.CreatedAt)
	if ls[0] != wantHeader {
		t.Errorf("line 1 = %s want %s", ls[0], wantHeader)
	}
	for i, l := range ls[1 : len(ls)-1] {
		var e session.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq != int64(i) {
			t.Errorf("line %d: seq %d, %v", i+2, e.Seq, err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("session file mode %v, %v; want 0600", fi.Mode(), err)
	}

	_, _ = store(t, root, session.CreateOptions{ID: "full", Cwd: "/w/p", ParentSession: "s/1", Origin: session.OriginSubagent,
		DelegationDepth: 2, Seed: events}, func(*session.Session) {})
	// The seed is pending until the first flush; detach flushes it.
	hs := lines(t, filepath.Join(root, "--w-p--", "full"+Ext))
	var rec map[string]any
	if err := json.Unmarshal([]byte(hs[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"type": "session", "parentSession": "s/1", "origin": "subagent",
		"seedLength": float64(len(events)), "delegationDepth": float64(2)} {
		if rec[k] != v {
			t.Errorf("header %s = %v, want %v", k, rec[k], v)
		}
	}
	if len(hs) != len(events)+3 || !strings.Contains(hs[len(hs)-2], `"type":"session/end-seed"`) {
		t.Errorf("seeded file: %d lines, last event %s", len(hs), hs[len(hs)-2])
	}
}

func TestLazyCreation(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sessions")
	st := session.NewStore(New(root), nil)
	s, err := st.Prepare(session.CreateOptions{ID: "lazy", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	detach, err := st.Enter(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Enter wrote to disk: %v", err)
	}
	mustAppend(t, s, session.TypeUserMessage, content.UserText("not yet"))
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unflushed Append wrote to disk: %v", err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if ls := lines(t, New(root).Path(s.Header())); len(ls) != 3 {
		t.Errorf("after Flush the file has %d lines, want header + 1 event", len(ls)-1)
	}
	detach()

	// A session detached without appending leaves nothing behind.
	_, detach, err = st.Create(session.CreateOptions{ID: "empty", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if _, ok := stat(paths(filepath.Join(root, "--w--"), "empty")); ok {
		t.Error("empty session left a file")
	}
	_, _, _, err = New(root).Load("empty")
	wantCode(t, err, session.CodeNotFound, "empty")
}

func TestCreateRefusesStoredID(t *testing.T) {
	root := t.TempDir()
	store(t, root, session.CreateOptions{ID: "x", Cwd: "/a"}, func(s *session.Session) { appendTurn(t, s, 1) })
	_, err := New(root).Create(session.Header{ID: "x", Cwd: "/b"})
	wantCode(t, err, session.CodeExists, "x")
	_, err = New(root).Create(session.Header{})
	wantCode(t, err, session.CodeInvalidHeader)

	// One backend reserves an id at Create; closing an unwritten persister
	// gives it back.
	b := New(root)
	p1, err := b.Create(session.Header{ID: "y", Cwd: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Create(session.Header{ID: "y", Cwd: "/b"})
	wantCode(t, err, session.CodeExists, "y")
	p1.Close()
	p1, err = b.Create(session.Header{ID: "y", Cwd: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()

	// Two backends (two processes) racing on one id: the second to write loses.
	p2, err := New(root).Create(session.Header{ID: "y", Cwd: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	ev := []session.Event{{Type: "todo/write", Data: json.RawMessage(`{}`)}}
	if err := p1.Append(ev); err != nil {
		t.Fatal(err)
	}
	wantCode(t, p2.Append(ev), session.CodeExists)
}

func TestTornLastLine(t *testing.T) {
	for _, tail := range []string{`{"type":"step/sta`, `{"type":"step/start","seq":`, "\x00\x00\x00", "{}}\n", "\n"} {
		t.Run(fmt.Sprintf("%q", tail), func(t *testing.T) {
			root := t.TempDir()
			h, want := store(t, root, session.CreateOptions{ID: "t"}, func(s *session.Session) { appendTurn(t, s, 1) })
			path := New(root).Path(h)
			intact, _ := os.ReadFile(path)
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(tail)
			f.Close()

			_, events := load(t, root, "t")
			if diff := cmp.Diff(want, events); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, intact) {
				t.Errorf("file not cut back to its intact %d bytes: %d bytes", len(intact), len(got))
			}
		})
	}
}

func TestLongLines(t *testing.T) {
	root := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB
	h, want := store(t, root, session.CreateOptions{ID: "big"}, func(s *session.Session) {
		mustAppend(t, s, session.TypeUserMessage, content.UserText(big))
		appendTurn(t, s, 1)
		mustAppend(t, s, session.TypeUserMessage, content.UserText(big))
	})
	path := New(root).Path(h)
	intact := fileSize(t, path)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"user/message","seq":99,"time":0,"data":{"content":[{"type":"text","text":"` + big[:1<<20])
	f.Close()
	if _, got := load(t, root, "big"); !cmp.Equal(want, got) {
		t.Errorf("loaded %d events, want %d", len(got), len(want))
	}
	if got := fileSize(t, path); got != intact {
		t.Errorf("torn 1 MiB line not cut: %d bytes, want %d", got, intact)
	}
}

func TestLastLineWithoutNewline(t *testing.T) {
	root := t.TempDir()
	h, want := store(t, root, session.CreateOptions{ID: "nl"}, func(s *session.Session) { appendTurn(t, s, 1) })
	path := New(root).Path(h)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.TrimSuffix(b, []byte("\n")), 0o600)

	s, detach, err := session.NewStore(New(root), nil).Load(context.Background(), "nl")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, s.Events()); diff != "" {
		t.Errorf("complete last line was dropped (-want +got):\n%s", diff)
	}
	appendTurn(t, s, 2)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if _, events := load(t, root, "nl"); len(events) != 2*len(want) {
		t.Errorf("after appending: %d events, want %d", len(events), 2*len(want))
	}
}

func TestInterruptedTurnClosedOnLoad(t *testing.T) {
	root := t.TempDir()
	_, stored := store(t, root, session.CreateOptions{ID: "i", Cwd: "/w"}, func(s *session.Session) {
		appendTurn(t, s, 1)
		appendOpenTurn(t, s, 2)
	})
	_, first := load(t, root, "i")
	if len(first) != len(stored)+4 {
		t.Fatalf("loaded %d events, want %d stored + 4 closers", len(first), len(stored))
	}
	codes := []string{}
	for _, e := range first[len(stored):] {
		if r, ok := e.Data.(session.ToolResult); ok {
			codes = append(codes, r.Error.Code)
		}
	}
	if want := []string{"TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"}; !slices.Equal(codes, want) || first[len(first)-1].Type != session.TypeTurnEnd {
		t.Errorf("closers: result codes %v, last %s", codes, first[len(first)-1].Type)
	}
	// The closers were persisted: the backend returns them and a second load
	// repairs nothing.
	_, raw, p, err := New(root).Load("i")
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if diff := cmp.Diff(first, raw); diff != "" {
		t.Errorf("persisted log differs from the repaired one (-repaired +stored):\n%s", diff)
	}
	if _, second := load(t, root, "i"); !cmp.Equal(first, second) {
		t.Errorf("second load differs: %d vs %d events", len(first), len(second))
	}
}

func TestLoadRefusals(t *testing.T) {
	tests := []struct {
		name   string
		edit   func([]string) []string
		code   string
		inText []string // besides the file path
	}{
		{"corrupt middle line", func(ls []string) []string { ls[4] = "{not json\n"; return ls },
			session.CodeCorrupt, []string{":5:"}},
		{"blank middle line", func(ls []string) []string { ls[6] = "\n"; return ls },
			session.CodeCorrupt, []string{":7:"}},
		{"bad payload", func(ls []string) []string {
			ls[2] = `{"type":"turn/start","seq":1,"time":0,"data":{"turn":"one"}}` + "\n"
			return ls
		}, session.CodeCorrupt, []string{":3:", "turn/start"}},
		{"seq gap", func(ls []string) []string { return slices.Delete(ls, 3, 4) },
			session.CodeCorrupt, []string{":4:", "seq 3, want 2"}},
		{"complete but wrong last line", func(ls []string) []string {
			return append(ls[:len(ls)-1], `{"seq":99}`+"\n")
		}, session.CodeCorrupt, []string{"no type"}},
		{"unknown required type last", func(ls []string) []string {
			return append(ls[:len(ls)-1], fmt.Sprintf(`{"type":"future/x","seq":%d,"time":0,"data":{}}`, len(ls)-2))
		}, session.CodeUnknownEvent, []string{"future/x"}},
		{"unknown required type middle", func(ls []string) []string {
			ls[3] = `{"type":"future/y","seq":2,"time":0,"data":{}}` + "\n"
			return ls
		}, session.CodeUnknownEvent, []string{":4:", "future/y"}},
		{"version 1", func(ls []string) []string {
			ls[0] = strings.Replace(ls[0], `"version":0`, `"version":1`, 1)
			return ls
		}, session.CodeFormat, []string{"version 1"}},
		{"not a header", func(ls []string) []string { return ls[1:] }, session.CodeCorrupt, []string{":1:"}},
		{"other id", func(ls []string) []string {
			ls[0] = strings.Replace(ls[0], `"id":"r"`, `"id":"q"`, 1)
			return ls
		}, session.CodeCorrupt, []string{":1:", `"q"`}},
		{"empty file", func([]string) []string { return nil }, session.CodeCorrupt, []string{"no header"}},
		{"result without call", func(ls []string) []string {
			n := len(ls) - 1
			return append(ls[:n], fmt.Sprintf(`{"type":"tool/result","seq":%d,"time":0,"data":{"turn":1,"step":1,"message":{"id":"m","role":"user","content":[{"type":"tool-result","toolCallId":"zz"}],"source":{"kind":"tool"}}},"surfaceOp":"append"}`+"\n", n-1))
		}, session.CodeCorrupt, []string{`"zz"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			h, _ := store(t, root, session.CreateOptions{ID: "r"}, func(s *session.Session) { appendTurn(t, s, 1) })
			path := New(root).Path(h)
			writeLines(t, path, tc.edit(lines(t, path)))
			before, _ := os.ReadFile(path)
			_, _, _, err := New(root).Load("r")
			wantCode(t, err, tc.code, append(tc.inText, path)...)
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("a refused load modified the file")
			}
		})
	}
}

func TestIgnorableUnknownTypeLoads(t *testing.T) {
	root := t.TempDir()
	h, _ := store(t, root, session.CreateOptions{ID: "ig"}, func(s *session.Session) { appendTurn(t, s, 1) })
	path := New(root).Path(h)
	ls := lines(t, path)
	line := fmt.Sprintf(`{"type":"future/z","seq":%d,"time":1,"data":{"k":[1]},"ignorable":true}`+"\n", len(ls)-2)
	writeLines(t, path, append(ls, line))
	_, events := load(t, root, "ig")
	last := events[len(events)-1]
	if raw, ok := last.Data.(json.RawMessage); !ok || string(raw) != `{"k":[1]}` || !last.Ignorable {
		t.Errorf("ignorable event loaded as %+v", last)
	}
}

func TestList(t *testing.T) {
	root := t.TempDir()
	if hs, err := New(filepath.Join(root, "missing")).List(); err != nil || hs != nil {
		t.Errorf("List of a missing root = %v, %v", hs, err)
	}
	var want []session.Header
	for _, opts := range []session.CreateOptions{{ID: "a", Cwd: "/x"}, {ID: "b", Cwd: "/x"}, {ID: "c", Cwd: "/y"}, {ID: "d"}} {
		h, _ := store(t, root, opts, func(s *session.Session) { appendTurn(t, s, 1) })
		want = append(want, h)
	}
	// Noise List must skip: a stray file, an empty session directory (the
	// earlier layout), a temporary or misnamed file, a torn header, an
	// unsupported version, and a header filed under another id, in either
	// layout.
	os.WriteFile(filepath.Join(root, "stray"), []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(root, "--x--", "nofile"), 0o700)
	os.WriteFile(filepath.Join(root, "--x--", ".0123456789abcdef.tmp"), []byte(`{"type":"session"`), 0o600)
	os.WriteFile(filepath.Join(root, "--x--", "bad~zz.jsonl"), []byte("x\n"), 0o600)
	for name, line := range map[string]string{
		"torn":  `{"type":"session","ver`,
		"v9":    `{"type":"session","version":9,"id":"v9","createdAt":1,"delegationDepth":0}`,
		"moved": `{"type":"session","version":0,"id":"elsewhere","createdAt":1,"delegationDepth":0}`,
	} {
		os.MkdirAll(filepath.Join(root, "--y--", name), 0o700)
		os.WriteFile(filepath.Join(root, "--y--", name, FileName), []byte(line+"\n"), 0o600)
		os.WriteFile(filepath.Join(root, "--y--", name+"2"+Ext), []byte(strings.Replace(line, `"elsewhere"`, `"moved"`, 1)+"\n"), 0o600)
	}
	got, err := New(root).List()
	if err != nil {
		t.Fatal(err)
	}
	byID := func(a, b session.Header) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(got, byID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List mismatch (-want +got):\n%s", diff)
	}
}

// failAfter makes the backend's writes fail after writing half the bytes
// while *fail is set.
func failAfter(b *Backend, fail *bool) {
	b.write = func(f *os.File, p []byte) (int, error) {
		if *fail {
			n, _ := f.Write(p[:len(p)/2])
			return n, errors.New("disk full")
		}
		return f.Write(p)
	}
}

// memLog returns the events build appends to an in-memory session.
func memLog(t testing.TB, build func(*session.Session)) []session.Event {
	t.Helper()
	s, detach, err := session.NewStore(nil, nil).Create(session.CreateOptions{ID: "mem"})
	if err != nil {
		t.Fatal(err)
	}
	build(s)
	detach()
	return s.Events()
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestWriteFailureRollsBack(t *testing.T) {
	events := memLog(t, func(s *session.Session) { appendTurn(t, s, 1); appendTurn(t, s, 2) })
	root := t.TempDir()
	b := New(root)
	var fail bool
	failAfter(b, &fail)
	h := session.Header{ID: "w", Cwd: "/w", CreatedAt: 1}
	path := b.Path(h)
	p, err := b.Create(h)
	if err != nil {
		t.Fatal(err)
	}

	fail = true
	if err := p.Append(events[:5]); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failed first write: Append = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed first write left a file: %v", err)
	}
	fail = false
	if err := p.Append(events[:5]); err != nil {
		t.Fatalf("Append after recovery: %v", err)
	}
	intact := fileSize(t, path)

	fail = true
	if err := p.Append(events[5:12]); err == nil {
		t.Fatal("Append reported no error on a failed write")
	}
	if got := fileSize(t, path); got != intact {
		t.Errorf("partial write not rolled back: %d bytes, want %d", got, intact)
	}
	_, got, live, err := New(root).Read("w")
	if err != nil || !live {
		t.Fatalf("file unreadable after a failed write: %v (live %v)", err, live)
	}
	if diff := cmp.Diff(events[:5], got); diff != "" {
		t.Errorf("after a failed write (-want +got):\n%s", diff)
	}

	fail = false
	if err := p.Append(events[3:4]); err == nil {
		t.Error("Append accepted a batch that does not continue the log")
	}
	for _, batch := range [][]session.Event{events[5:12], events[12:]} {
		if err := p.Append(batch); err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	wantCode(t, p.Append(events[:1]), session.CodeClosed)
	if _, got := load(t, root, "w"); !cmp.Equal(events, got) {
		t.Errorf("after recovery the file holds %d events, want %d", len(got), len(events))
	}
}

func TestSessionWriteFailure(t *testing.T) {
	root := t.TempDir()
	b := New(root)
	var fail bool
	failAfter(b, &fail)
	s, detach, err := session.NewStore(b, nil).Create(session.CreateOptions{ID: "sw"})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, s, 1)
	flushed := s.Len()
	fail = true
	appendTurn(t, s, 2)
	if err := s.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Flush = %v, want the write error", err)
	}
	if err := detach(); err == nil {
		t.Error("detach hid the write error")
	}
	fail = false
	if _, events := load(t, root, "sw"); len(events) != flushed {
		t.Errorf("loaded %d events, want the %d flushed before the failure", len(events), flushed)
	}
}

func TestConcurrentSessions(t *testing.T) {
	root := t.TempDir()
	st := session.NewStore(New(root), nil)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, detach, err := st.Create(session.CreateOptions{ID: fmt.Sprint("c", i), Cwd: fmt.Sprint("/p", i%3)})
			if err != nil {
				t.Error(err)
				return
			}
			defer detach()
			for turn := 1; turn <= 3; turn++ {
				for _, typ := range []string{session.TypeTurnStart, session.TypeStepStart, session.TypeStepEnd, session.TypeTurnEnd} {
					data := any(session.Step{Turn: turn, Step: 1})
					switch typ {
					case session.TypeTurnStart:
						data = session.TurnStart{Turn: turn}
					case session.TypeTurnEnd:
						data = session.TurnEnd{Turn: turn, Reason: session.EndReason{Kind: session.EndCompleted}}
					}
					if _, err := s.Append(typ, data); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	hs, err := st.List()
	if err != nil || len(hs) != n {
		t.Fatalf("List: %d headers, %v", len(hs), err)
	}
	for _, h := range hs {
		if _, events := load(t, root, h.ID); len(events) != 12 {
			t.Errorf("%s: %d events, want 12", h.ID, len(events))
		}
	}
}

// N14: a FIFO (or a device behind a symlink) named session.jsonl hung every
// reader. List skips it; Read and Load refuse it, naming the file, at once.
func TestNonRegularSessionFiles(t *testing.T) {
	root := t.TempDir()
	h, _ := store(t, root, session.CreateOptions{ID: "real", Cwd: "/x"}, func(s *session.Session) { appendTurn(t, s, 1) })
	// Both layouts: a directory per session (earlier builds) and a file.
	fifo := filepath.Join(root, ProjectKey("/x"), EncodeID("fifo"), FileName)
	dev := filepath.Join(root, ProjectKey("/x"), EncodeID("dev"), FileName)
	os.MkdirAll(filepath.Dir(fifo), 0o700)
	os.MkdirAll(filepath.Dir(dev), 0o700)
	for _, f := range []string{fifo, filepath.Join(root, ProjectKey("/x"), "fifo2"+Ext)} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{dev, filepath.Join(root, ProjectKey("/x"), "dev2"+Ext)} {
		if err := os.Symlink("/dev/zero", d); err != nil {
			t.Fatal(err)
		}
	}
	b := New(root)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs, err := b.List()
		if err != nil || len(hs) != 1 || hs[0].ID != h.ID {
			t.Errorf("List = %v, %v; want only %s", hs, err, h.ID)
		}
		for _, id := range []string{"fifo", "dev", "fifo2", "dev2"} {
			_, _, _, err := b.Read(id)
			wantCode(t, err, session.CodeCorrupt, "is not a regular file", id)
			_, _, _, err = b.Load(id)
			wantCode(t, err, session.CodeCorrupt, "is not a regular file")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a reader hangs on a FIFO") // the goroutine stays: the FIFO blocks it
	}
}
