package temporal

import (
	"encoding/json"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// The names a parent and its workers agree on. Changing one strands the
// children of older versions.
const (
	// WorkflowName is the child's workflow type.
	WorkflowName = "dsh.child"
	// ActivityName is the activity that runs one attempt of a child.
	ActivityName = "dsh.runChild"
	// CheckpointUpdate is the workflow update through which an attempt adds
	// to the child's log.
	CheckpointUpdate = "dsh.checkpoint"
	// WorkflowIDPrefix prefixes a child's session id to make its workflow id.
	WorkflowIDPrefix = "dsh-child-"
)

// Input is a child's workflow input: everything a worker needs to run it.
// Persona, tool filter, output schema and depth cap are applied by the
// worker exactly as the in-process driver applies them.
type Input struct {
	// SessionID is the child's session id, minted by the parent.
	SessionID string `json:"sessionId"`
	// ParentSession and Depth are the child's lineage.
	ParentSession string `json:"parentSession"`
	Depth         int    `json:"depth"`
	// MaxDepth is the parent's cap on the child's tree (nil: none).
	MaxDepth *int   `json:"maxDepth,omitempty"`
	Label    string `json:"label,omitempty"`
	// Prompt is the child's task.
	Prompt []content.Block `json:"prompt"`
	// AgentOptions override the worker's default route and limits.
	AgentOptions *agent.Options `json:"agentOptions,omitempty"`
	// OutputSchema is the JSON schema of a structured result.
	OutputSchema json.RawMessage   `json:"outputSchema,omitempty"`
	ToolFilter   *tool.Restriction `json:"toolFilter,omitempty"`
	Persona      *string           `json:"persona,omitempty"`
	// Policy is the parent's permission policy, which the child can only
	// narrow; the worker narrows it further by its own.
	Policy permission.Policy `json:"policy"`
	// TokenBudget is what was left of the parent tree's budget (0: none).
	TokenBudget int64 `json:"tokenBudget,omitempty"`
	// HeartbeatTimeout is how long an attempt may go without a heartbeat
	// before its worker is taken for dead; RunTimeout bounds an attempt.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout"`
	RunTimeout       time.Duration `json:"runTimeout"`
	// MaxResumes bounds how often the child continues on another worker.
	MaxResumes int `json:"maxResumes"`
}

// Attempt is one activity attempt's input: the child, which attempt this
// is (from 1), and the length of the child's log it starts from.
type Attempt struct {
	Input   Input `json:"input"`
	Attempt int   `json:"attempt"`
	From    int   `json:"from"`
}

// Checkpoint is what an attempt adds to the child's log: Events continue
// the log, whose length was From. The first checkpoint of an attempt (its
// claim, sent before the child's first model call) carries the header.
type Checkpoint struct {
	Attempt int             `json:"attempt"`
	From    int             `json:"from"`
	Header  *session.Header `json:"header,omitempty"`
	Events  []session.Event `json:"events,omitempty"`
}

// Outcome is an attempt's result and a child workflow's. The child's
// output, usage and structured value are in its log; the outcome says how
// the run ended, which the log alone cannot say when the child never
// finished its turn.
type Outcome struct {
	StopReason subagent.StopReason `json:"stopReason"`
	Diagnostic string              `json:"diagnostic,omitempty"`
	// LogLen is the length of the child's log when the workflow closed.
	LogLen int `json:"logLen"`
	// Tail, in an attempt's outcome, is the end of the log that followed
	// its last step boundary (the child's answer and its turn's end): the
	// workflow adds it to the log as it would a checkpoint, and readers of
	// the history find it in the activity's completion. Nil in the
	// workflow's result.
	Tail *Checkpoint `json:"tail,omitempty"`
}

// WorkflowID returns the workflow id of the child with session id id.
func WorkflowID(id string) string { return WorkflowIDPrefix + id }
