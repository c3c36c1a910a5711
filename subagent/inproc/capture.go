package inproc

import (
	"context"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/tool"
)

// Capture records a structured child's structured_output call.
type Capture struct {
	mu       sync.Mutex
	recorded bool
	value    any
}

// install registers the child-scoped structured_output tool of schema and
// a guard that refuses every tool call once a value is recorded (the
// instruction to call it is in the child's first message, see
// FirstMessage).
func (c *Capture) install(a *agent.Agent, schema *jsonschema.Schema) error {
	def := tool.Definition{Name: StructuredTool, Parameters: schema,
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
		if _, done := c.Value(); done {
			return tool.Errorf(tool.CodeDenied, "structured output already recorded; tool %s was not executed", call.Name)
		}
		return nil
	})
	return nil
}

// Value returns the recorded value; ok is false until the child's
// structured_output call.
func (c *Capture) Value() (v any, ok bool) {
	if c == nil { // a child without an output schema has none
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.value, c.recorded
}

// newCapture returns the capture of a child with an output schema, and
// nil without one: most children never record a value.
func newCapture(schema *jsonschema.Schema) *Capture {
	if schema == nil {
		return nil
	}
	return &Capture{}
}

// Shaping is what a delegation asks of its child's agent: its tool
// filter, its persona and, with an output schema, the structured_output
// tool it must finish with. Every in-process child is shaped by Shape, and
// so is the session a dsh parent opens in `dsh acp`.
type Shaping struct {
	ToolFilter   *tool.Restriction
	Persona      *string
	OutputSchema *jsonschema.Schema
}

// Shape applies s to a in its unpublished setup window
// (agent.CreateOptions.Setup): filtered tools vanish from its prompt and
// refuse to run, the persona shadows the deployment's, and an output
// schema installs structured_output, whose value c records (c must be
// non-nil then).
func Shape(a *agent.Agent, s Shaping, c *Capture) error {
	if err := composeChild(a, s.ToolFilter, s.Persona); err != nil {
		return err
	}
	if s.OutputSchema != nil {
		return c.install(a, s.OutputSchema)
	}
	return nil
}
