package agent

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/tool"
)

// tree is what every agent of one delegation tree shares: whoever answers
// permission asks, the tools a person allowed for the rest of the tree's
// life, and the token budget.
type tree struct {
	asker    permission.Asker
	budget   int64        // tokens the tree may use; 0: unbounded
	used     atomic.Int64 // tokens used so far
	reserved atomic.Int64 // tokens held by the model calls in flight (see reserve)
	lastCall atomic.Int64 // tokens of the tree's last model call that reported usage

	mu     sync.Mutex
	always map[string]bool // tools allowed for the tree's lifetime
}

func newTree(asker permission.Asker, budget int64) *tree {
	return &tree{asker: asker, budget: budget}
}

// tokens is what u counts against the budget.
func tokens(u content.Usage) int64 { return u.Input + u.CacheRead + u.Output }

// charge counts the tokens of u against the budget.
func (t *tree) charge(u content.Usage) { t.used.Add(tokens(u)) }

// newPrompt starts the budget afresh: a person's prompt to the root agent
// may spend the whole budget again (tokens held by calls in flight stay
// held).
func (t *tree) newPrompt() { t.used.Store(0) }

// exhausted reports whether the tree has used its whole budget.
func (t *tree) exhausted() bool { return t.budget > 0 && t.used.Load() >= t.budget }

// reserve holds est tokens of the budget for a model call about to be
// made, and reports false, holding nothing, when the tokens used and those
// held by the calls in flight already reach the budget. So parallel
// agents of one tree cannot all pass the check before any of them has
// reported usage: each call is admitted against what the others hold, and
// the budget is overshot by at most what calls use beyond their estimate
// plus the one call that crosses it.
func (t *tree) reserve(est int64) bool {
	if t.budget <= 0 {
		return true
	}
	for {
		held := t.reserved.Load()
		if t.used.Load()+held >= t.budget {
			return false
		}
		if t.reserved.CompareAndSwap(held, held+est) {
			return true
		}
	}
}

// settle ends a reservation of est tokens: the call used u (nil: it
// reported no usage). Usage is counted before the hold is released, so
// that a concurrent reserve never sees less than is spent or held. A call
// abandoned after it was sent (its context ended before it reported usage)
// counts at its estimate: the provider may bill it, and releasing its hold
// for nothing let the calls of siblings still running pass the budget while
// the tree was being stopped.
func (t *tree) settle(est int64, u *content.Usage, abandoned bool) {
	switch {
	case u != nil:
		t.charge(*u)
		t.lastCall.Store(tokens(*u))
	case abandoned && t.budget > 0:
		t.used.Add(est)
	}
	if t.budget > 0 {
		t.reserved.Add(-est)
	}
}

func (t *tree) allowedAlways(tool string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.always[tool]
}

func (t *tree) allowAlways(tool string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.always == nil {
		t.always = map[string]bool{}
	}
	t.always[tool] = true
}

// Policy returns the permission policy the agent was created with: its
// owner's, narrowed by its own rules.
func (a *Agent) Policy() permission.Policy { return a.policy }

// Label returns the agent's path in its delegation tree, root first: empty
// for a root agent.
func (a *Agent) Label() []string { return a.path }

// TokensUsed returns the tokens the agent's whole delegation tree has used
// since the root's last prompt from a person, and its budget (0:
// unbounded).
func (a *Agent) TokensUsed() (used, budget int64) { return a.tree.used.Load(), a.tree.budget }

// Charge counts tokens used on the tree's behalf outside its agents' own
// model calls (an out-of-process child's usage) against its budget.
func (a *Agent) Charge(u content.Usage) { a.tree.charge(u) }

// Authorize decides whether a call may run under the agent's policy. It
// returns nil when it may, and a *tool.Error with code DENIED that says why
// when it may not. A call the policy says to ask about goes to the tree's
// Asker; req.Agent names the asking agent below this one (empty for the
// agent's own calls, the child's path for a call an out-of-process child
// relays).
func (a *Agent) Authorize(ctx context.Context, req permission.Request) error {
	return a.authorize(ctx, req, "")
}

// authorize is Authorize after a PreToolUse hook's permission decision
// hookSays (hook.Allow, hook.Ask or ""): allow skips the ask the policy
// wants, ask asks even where the policy allows; neither lifts a deny.
func (a *Agent) authorize(ctx context.Context, req permission.Request, hookSays string) error {
	req.Agent = append(append([]string(nil), a.path...), req.Agent...)
	if req.SessionID == "" {
		req.SessionID = a.id
	}
	switch a.policy.Decide(req.Tool) {
	case permission.Allow:
		if hookSays != hook.Ask {
			return nil
		}
	case permission.Ask:
		if hookSays == hook.Allow {
			return nil
		}
	default:
		return tool.Errorf(tool.CodeDenied, "the permission policy denies %s%s", req.Tool, by(req))
	}
	if a.tree.allowedAlways(req.Tool) && hookSays != hook.Ask {
		return nil
	}
	if a.tree.asker == nil {
		return tool.Errorf(tool.CodeDenied, "%s%s needs approval, and nobody can approve it here", req.Tool, by(req))
	}
	a.notifyHooks(ctx, req)
	ans, err := a.tree.asker.Ask(ctx, req)
	switch {
	case err != nil:
		return tool.Errorf(tool.CodeDenied, "%s was not approved: %v", req.Tool, err)
	case ans == permission.AllowAlways:
		a.tree.allowAlways(req.Tool)
		return nil
	case ans == permission.AllowOnce:
		return nil
	}
	return tool.Errorf(tool.CodeDenied, "the user rejected this call of %s%s", req.Tool, by(req))
}

// by names a child that asks, for messages: "" for the root agent.
func by(req permission.Request) string {
	if len(req.Agent) == 0 {
		return ""
	}
	return " by " + req.Who()
}
