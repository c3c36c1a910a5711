package claudecode

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/subagent/childproc"
)

// Real lines of Claude Code 2.1.332 (trimmed of fields the provider does
// not read).
var seedLines = []string{
	`{"type":"system","subtype":"init","cwd":"/tmp/ccx","session_id":"e120d452-d1cf-4d47-b1c5-c813e14a8e15","tools":["Task","Bash","Write"],"mcp_servers":[],"model":"mock-model","permissionMode":"dontAsk","apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.332"}`,
	`{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"mock-model","content":[{"type":"text","text":"Hello from mock"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":1,"cache_read_input_tokens":3,"cache_creation_input_tokens":2},"context_management":null},"parent_tool_use_id":null,"session_id":"e120d452","uuid":"a59f5d96"}`,
	`{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"mock-model","content":[{"type":"tool_use","id":"toolu_01","name":"Write","input":{"file_path":"/tmp/ccx/out.txt","content":"x"}}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"793344eb"}`,
	`{"type":"control_request","request_id":"4cf5fb7c-53e4-4b17-8091-ab8fd306df00","request":{"subtype":"can_use_tool","tool_name":"Write","display_name":"Write","input":{"file_path":"/tmp/ccx/out.txt","content":"x"},"description":"out.txt","permission_suggestions":[{"type":"setMode","mode":"acceptEdits","destination":"session"}],"tool_use_id":"toolu_01"}}`,
	`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"denied by dsh policy","is_error":true,"tool_use_id":"toolu_01"}]},"parent_tool_use_id":null,"session_id":"793344eb","tool_use_result":"Error: denied by dsh policy"}`,
	`{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"toolu_01","decision_reason_type":"mode","message":"Permission to use Write has been denied"}`,
	`{"type":"control_response","response":{"subtype":"success","request_id":"int1","response":{"still_queued":[]}}}`,
	`{"duration_api_ms":52,"stop_reason":"end_turn","session_id":"e120d452","total_cost_usd":0.0001546,"usage":{"input_tokens":11,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":5,"output_tokens_details":{"thinking_tokens":0}},"modelUsage":{"mock-model":{"inputTokens":11,"outputTokens":5,"cacheReadInputTokens":3,"cacheCreationInputTokens":2,"webSearchRequests":0,"costUSD":0.0001546,"contextWindow":1000000}},"permission_denials":[],"terminal_reason":"completed","is_error":false,"num_turns":1,"subtype":"success","api_error_status":null,"result":"Hello from mock","type":"result"}`,
	`{"duration_api_ms":0,"stop_reason":"stop_sequence","total_cost_usd":0,"modelUsage":{},"permission_denials":[],"terminal_reason":"api_error","is_error":true,"num_turns":1,"subtype":"success","api_error_status":401,"api_error_type":"authentication_error","result":"Invalid API key · Fix external API key","type":"result"}`,
	`{"stop_reason":null,"total_cost_usd":7.46e-05,"terminal_reason":"aborted_streaming","is_error":true,"num_turns":2,"subtype":"error_during_execution","errors":["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],"type":"result"}`,
}

// FuzzReader feeds arbitrary stdout to the line reader and decoder: they
// never panic, never return a line over the limit, and end every stream
// with io.EOF or a childproc.LineTooLongError.
func FuzzReader(f *testing.F) {
	f.Add([]byte(strings.Join(seedLines, "\n") + "\n"))
	for _, l := range seedLines {
		f.Add([]byte(l))
	}
	f.Add([]byte("not json\r\n{\"type\":5}\n\n{\"type\":\"assistant\",\"message\":{\"content\":\"x\"}}"))
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":5},7,null]}}` + "\n"))
	f.Add(bytes.Repeat([]byte("x"), 3000))
	const limit = 1024
	f.Fuzz(func(t *testing.T, data []byte) {
		lr := childproc.NewLineReader(bytes.NewReader(data), limit, "stream-json")
		consumed := 0
		for lines := 0; ; lines++ {
			if lines > len(data)+1 {
				t.Fatal("more lines than bytes: the reader does not advance")
			}
			line, err := lr.Next()
			if err != nil {
				var long *childproc.LineTooLongError
				if !errors.Is(err, io.EOF) && !errors.As(err, &long) {
					t.Fatalf("error %v", err)
				}
				if errors.Is(err, io.EOF) && consumed > len(data)+1 {
					t.Fatalf("consumed %d of %d bytes", consumed, len(data))
				}
				return
			}
			if len(line) > limit {
				t.Fatalf("line of %d bytes over the %d limit", len(line), limit)
			}
			consumed += len(line) + 1
			m, ok := decode(line)
			if !ok {
				continue
			}
			if m.Message != nil {
				m.Message.blocks()
			}
			if m.Type == typeResult {
				describe(&m)
			}
		}
	})
}
