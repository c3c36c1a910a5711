package codex

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/subagent/childproc"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

// FuzzReader feeds arbitrary bytes, as Codex's stdout, to the line reader
// and the turn state behind it: nothing may panic or spin, the reader may
// buffer at most its limit, and it may only fail with its typed errors.
func FuzzReader(f *testing.F) {
	for _, data := range transcripts(f) {
		f.Add(data)
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			f.Add(line)
		}
	}
	for _, s := range []string{"", "\n", "\r\n\r\n", "{}", "null", `{"id":null}`, `{"id":0}`, `{"id":1e99,"result":1}`,
		`{"id":0,"error":{"code":-1,"message":"x"}}`, `{"method":"turn/completed","params":null}`,
		`{"method":"item/completed","params":{"threadId":"t","item":{"type":"agentMessage","text":"a","phase":"final_answer"}}}`,
		`{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"failed","error":{"message":"m","codexErrorInfo":{"a":{"httpStatusCode":1}}}}}}`,
		`{"id":0,"method":"item/permissions/requestApproval","params":{"permissions":{"network":{}}}}`,
		`{"id":"x","method":"item/tool/call"}`, strings.Repeat("x", 5000), "\xff\xfe{\"method\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	const limit = 4096
	threadIDPattern := regexp.MustCompile(`"threadId":"([^"]*)"`) // the thread an input talks about
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range []string{PermissionNever, PermissionApproveForMe} {
			s := newTurnState(mode, func(subagent.Progress) {}, func(permission.Request) bool { return true })
			s.setThread("t")
			if m := threadIDPattern.FindSubmatch(data); m != nil {
				s.setThread(string(m[1]))
			}
			r := newReader(bytes.NewReader(data), limit)
			turn, err := replay(r, data, s)
			var long *childproc.LineTooLongError
			var proto *ProtocolError
			if err != io.EOF && !errors.As(err, &long) && !errors.As(err, &proto) {
				t.Fatalf("reader failed with %T %v", err, err)
			}
			if r.lines.Cap() > limit {
				t.Fatalf("reader buffer of %d bytes", r.lines.Cap())
			}
			if turn != nil {
				res := s.outcome(*turn)
				if !res.StopReason.Known() || len(res.Diagnostic) > subagent.MaxDiagnostic {
					t.Fatalf("outcome %+v", res)
				}
			}
			s.partial()
		}
	})
}
