package inproc

import (
	"context"
	"sync"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// capture records a structured child's structured_output call.
type capture struct {
	mu       sync.Mutex
	recorded bool
	value    any
}

// install registers the child-scoped structured_output tool and a guard
// that refuses every tool call once a value is recorded (the instruction to
// call it is in the child's first message, see FirstMessage).
func (c *capture) install(a *agent.Agent, req subagent.StartRequest) error {
	def := tool.Definition{Name: StructuredTool, Parameters: req.OutputSchema,
		Description: "Record your final result. Its arguments are the result; calling it ends your task.",
		Execute: func(ctx context.Context, call tool.Call) (tool.Result, error) {
			if call.Args == nil {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "%s runs only through a tool scope", StructuredTool)
			}
			c.mu.Lock()
			c.recorded, c.value = true, any(call.Args)
			c.mu.Unlock()
			res := tool.TextResult("recorded")
			res.ConcludesTurn = true
			return res, nil
		}}
	if _, err := a.Tools().Register(def); err != nil {
		return err
	}
	a.Tools().Guard(func(_ context.Context, call tool.Call) error {
		if _, done := c.get(); done {
			return tool.Errorf(tool.CodeDenied, "structured output already recorded; tool %s was not executed", call.Name)
		}
		return nil
	})
	return nil
}

func (c *capture) get() (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value, c.recorded
}
