package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"

	"github.com/dsh-go/dsh/session"
)

// TestHeaderRecordMatchesJSON: the header record and a child's tag are
// written as encoding/json writes them, whatever the ids, paths and origin
// hold.
func TestHeaderRecordMatchesJSON(t *testing.T) {
	strs := []string{"", "abc", `"q" \ b`, "<&>", "\x00\x1f\x7f\n\t", "é\u2028\u2029", "bad\xff\xe2\x82"}
	for _, s := range strs {
		for _, n := range []int{0, 1, -3} {
			h := session.Header{Version: n, ID: s, CreatedAt: int64(n) << 40, Cwd: s, ParentSession: s,
				SeedLength: n, Origin: s, DelegationDepth: n}
			want, err := json.Marshal(headerRecord{Type: recordType, Header: h})
			if err != nil {
				t.Fatal(err)
			}
			if got := appendHeader([]byte("x"), &h); !bytes.Equal(got[1:], want) {
				t.Fatalf("%+v:\ngot  %s\nwant %s", h, got[1:], want)
			}
		}
		// Every field set through reflection: a field added to Header later
		// fails here until appendHeader writes it.
		var h session.Header
		hv := reflect.ValueOf(&h).Elem()
		for i := range hv.NumField() {
			switch f := hv.Field(i); f.Kind() {
			case reflect.String:
				f.SetString(s + "f")
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(i + 1))
			default:
				t.Fatalf("Header.%s: a %s; teach this test and appendHeader", hv.Type().Field(i).Name, f.Kind())
			}
		}
		want, _ := json.Marshal(headerRecord{Type: recordType, Header: h})
		if got := appendHeader(nil, &h); !bytes.Equal(got, want) {
			t.Fatalf("every field set:\ngot  %s\nwant %s", got, want)
		}
		q, _ := json.Marshal(s)
		if got, want := tagOf(s), append([]byte(sidKey), q...); !bytes.Equal(got, want) {
			t.Fatalf("tag of %q: %s, want %s", s, got, want)
		}
	}
}

// TestPathLockedMatchesPath: the cached project directory gives Path's
// name, for any root, working directory and id.
func TestPathLockedMatchesPath(t *testing.T) {
	for _, root := range []string{"", "/r", "rel/../x/", "/a//b/"} {
		b := New(root)
		for _, cwd := range []string{"", "/", "/home/u/p", "C:\\x", "/ü/..", "/home/u/p"} {
			for _, id := range []string{"6d924b17-f0c8", ".", "..", "a/b", "é", "x.y_z"} {
				h := session.Header{ID: id, Cwd: cwd}
				b.mu.Lock()
				got := b.pathLocked(h)
				b.mu.Unlock()
				if want := b.Path(h); got != want {
					t.Fatalf("root %q, cwd %q, id %q: %q, want %q", root, cwd, id, got, want)
				}
			}
		}
	}
}

// TestHugeToolResultInAChildsLine: a 10 MB tool result that needs escapes
// every few bytes, a child's line in its root's file, is written as
// encoding/json writes it, reads back whole, and the storage it was
// encoded into is not kept for the next Append.
func TestHugeToolResultInAChildsLine(t *testing.T) {
	root := t.TempDir()
	tr := newTree(t, root)
	defer tr.closeAll(t)
	text := strings.Repeat("<b>\t\"é\"\\ \u2028 line\n", 10<<20/22)
	res := session.ToolResult{Turn: 1, Step: 1, Message: content.ToolResultMessage("big", []content.Block{content.Text(text)}, false),
		Meta: json.RawMessage(`{"bytes":10485760}`)}
	c, detach, err := tr.st.Create(session.CreateOptions{ID: "c3", Cwd: "/w", ParentSession: "root", Origin: session.OriginSubagent, DelegationDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	mustAppend(t, c, session.TypeTurnStart, session.TurnStart{Turn: 1})
	mustAppend(t, c, session.TypeUserMessage, content.UserText("go"))
	mustAppend(t, c, session.TypeStepStart, session.Step{Turn: 1, Step: 1})
	mustAppend(t, c, session.TypeAssistantMessage, session.AssistantMessage{Turn: 1, Step: 1,
		Message: content.AssistantMessage("p", "m", []content.Block{content.ToolCall("big", "run", `{}`)})})
	call := mustAppend(t, c, session.TypeToolCall, session.ToolCall{Turn: 1, Step: 1, CallID: "big", Name: "run", Arguments: `{}`})
	e := mustAppend(t, c, session.TypeToolResult, res, call.Seq)
	flush(t, c)

	data, err := os.ReadFile(filepath.Join(tr.rootDir, "c3"+Ext))
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	last := ls[len(ls)-1]
	want, _ := json.Marshal(res)
	prefix := fmt.Sprintf(`{"sid":"c3","type":"tool/result","seq":%d,"time":%d,"data":`, e.Seq, e.Time)
	if !bytes.HasPrefix(last, []byte(prefix)) || !bytes.Contains(last, want) {
		t.Fatalf("the child's last line (%d bytes) is not its tag, envelope and encoding/json's payload (%d bytes)", len(last), len(want))
	}
	if lb, ok := tr.b.lines.Get().(*lineBuf); ok && cap(lb.b) > maxLineBuf {
		t.Errorf("a %d-byte buffer kept for the next Append", cap(lb.b))
	}
	_, events, _, err := tr.b.Read("c3")
	if err != nil {
		t.Fatal(err)
	}
	if d := events[len(events)-1].Data.(session.ToolResult); content.JoinText(d.Message.Content[0].Content) != text {
		t.Error("the 10 MB text did not read back whole")
	}
}

func TestSameDir(t *testing.T) {
	paths := []string{"/r/p/a.jsonl", "/r/p/b.jsonl", "/r/q/a.jsonl", "/r/pp/a.jsonl", "/a.jsonl", "/b.jsonl", "a.jsonl", "b.jsonl", "p/a.jsonl", filepath.Join("r", "p", "c.jsonl")}
	for _, a := range paths {
		for _, b := range paths {
			if got, want := sameDir(a, b), filepath.Dir(a) == filepath.Dir(b); got != want {
				t.Errorf("sameDir(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
}
