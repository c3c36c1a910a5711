// Package einocase builds the same delegation task on cloudwego/eino's ADK:
// a parent ChatModelAgent whose tool is a child ChatModelAgent wrapped with
// adk.NewAgentTool (agent-as-tool), both on a fake ToolCallingChatModel that
// answers at once, driven through an adk.Runner.
package einocase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// The scenario's fixed texts, as in dshcase.
const (
	ChildAnswer    = "child answer"
	ParentAnswer   = "parent done"
	PromptDelegate = "delegate"
	ToolName       = "subagent"
	ToolArgs       = `{"request":"do X"}`
)

// fakeModel is a ToolCallingChatModel that answers at once. The child
// always answers ChildAnswer; the parent calls the agent tool, then answers
// ParentAnswer once the tool result is in its input.
type fakeModel struct {
	child    bool
	failures *atomic.Int64
}

var _ model.ToolCallingChatModel = (*fakeModel)(nil)

func usage() *schema.ResponseMeta {
	return &schema.ResponseMeta{Usage: &schema.TokenUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
}

// answer returns the assistant message for input (one message: the
// non-streaming case).
func (m *fakeModel) answer(input []*schema.Message) *schema.Message {
	if m.child {
		msg := schema.AssistantMessage(ChildAnswer, nil)
		msg.ResponseMeta = usage()
		msg.ResponseMeta.FinishReason = "stop"
		return msg
	}
	last := input[len(input)-1]
	if last.Role == schema.Tool {
		if last.Content != ChildAnswer {
			m.failures.Add(1)
		}
		msg := schema.AssistantMessage(ParentAnswer, nil)
		msg.ResponseMeta = usage()
		msg.ResponseMeta.FinishReason = "stop"
		return msg
	}
	if last.Role != schema.User || last.Content != PromptDelegate {
		m.failures.Add(1)
	}
	msg := schema.AssistantMessage("", []schema.ToolCall{{ID: "call_1", Type: "function",
		Function: schema.FunctionCall{Name: ToolName, Arguments: ToolArgs}}})
	msg.ResponseMeta = usage()
	msg.ResponseMeta.FinishReason = "tool_calls"
	return msg
}

// Generate implements model.BaseChatModel.
func (m *fakeModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	return m.answer(input), nil
}

// Stream implements model.BaseChatModel: the answer as two chunks, its
// content (text or tool call) then the finish reason and usage.
func (m *fakeModel) Stream(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	full := m.answer(input)
	body := &schema.Message{Role: schema.Assistant, Content: full.Content}
	if len(full.ToolCalls) > 0 {
		idx := 0
		tc := full.ToolCalls[0]
		tc.Index = &idx
		body.ToolCalls = []schema.ToolCall{tc}
	}
	tail := &schema.Message{Role: schema.Assistant, ResponseMeta: full.ResponseMeta}
	return schema.StreamReaderFromArray([]*schema.Message{body, tail}), nil
}

// WithTools implements model.ToolCallingChatModel.
func (m *fakeModel) WithTools(_ []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// Env is the parent agent (with the child as its tool) and its runner.
type Env struct {
	Runner    *adk.Runner
	Streaming bool
	failures  atomic.Int64
}

// New wires the parent and the child. Streaming selects the runner's
// EnableStreaming (the model's Stream instead of Generate, for the parent
// and, through the agent tool, the child).
func New(ctx context.Context, streaming bool) (*Env, error) {
	e := &Env{Streaming: streaming}
	child, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        ToolName,
		Description: "Delegate a self-contained task to a subagent.",
		Instruction: dsh.Identity + "\n\n" + inproc.DelegationText,
		Model:       &fakeModel{child: true, failures: &e.failures},
	})
	if err != nil {
		return nil, err
	}
	parent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "parent",
		Description: "The delegating agent.",
		Instruction: dsh.Identity,
		Model:       &fakeModel{failures: &e.failures},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{
			Tools: []tool.BaseTool{adk.NewAgentTool(ctx, child)},
		}},
	})
	if err != nil {
		return nil, err
	}
	e.Runner = adk.NewRunner(ctx, adk.RunnerConfig{Agent: parent, EnableStreaming: streaming})
	return e, nil
}

// Failures returns how many model inputs did not look as expected.
func (e *Env) Failures() int64 { return e.failures.Load() }

// Delegation runs one parent turn with one delegation: the runner's events
// are drained (streams read to the end) and the last one must be the
// parent's final answer.
func (e *Env) Delegation(ctx context.Context) error {
	it := e.Runner.Run(ctx, []adk.Message{schema.UserMessage(PromptDelegate)})
	var last string
	var tool string
	for {
		ev, ok := it.Next()
		if !ok {
			break
		}
		if ev.Err != nil {
			return ev.Err
		}
		if ev.Output == nil || ev.Output.MessageOutput == nil {
			continue
		}
		mo := ev.Output.MessageOutput
		var msg *schema.Message
		if mo.IsStreaming {
			var err error
			if msg, err = drain(mo.MessageStream); err != nil {
				return err
			}
		} else {
			msg = mo.Message
		}
		switch mo.Role {
		case schema.Tool:
			tool = msg.Content
		case schema.Assistant:
			last = msg.Content
		}
	}
	if tool != ChildAnswer || last != ParentAnswer {
		return fmt.Errorf("eino: tool result %q, final answer %q", tool, last)
	}
	return nil
}

func drain(s *schema.StreamReader[*schema.Message]) (*schema.Message, error) {
	defer s.Close()
	var chunks []*schema.Message
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, c)
	}
	if len(chunks) == 0 {
		return &schema.Message{}, nil
	}
	return schema.ConcatMessages(chunks)
}
