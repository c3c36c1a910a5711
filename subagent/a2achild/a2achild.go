// Package a2achild is the subagent provider whose children are tasks on a
// remote Agent2Agent (A2A) agent: Start fetches and checks the agent's
// card, sends the task as one message (streamed when the card says the
// agent streams, else sent and polled), relays status updates and
// artifact chunks as progress, and settles on the task's terminal state
// with its final text artifact as the output. It speaks A2A 0.3 over
// JSON-RPC, with the a2a-go SDK's types and a client of its own (wire.go).
package a2achild

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// Kind is the provider kind, as configuration files and errors name it.
const Kind = "a2a"

// The metadata keys a dsh parent puts on the messages it sends and a dsh
// server puts on its tasks. Other agents ignore them.
const (
	// MetaDepth is the child's delegation depth (a number).
	MetaDepth = "dsh/depth"
	// MetaMaxDepth is the deepest depth the tree allows (a number).
	MetaMaxDepth = "dsh/maxDepth"
	// MetaParentSession is the delegating session's id.
	MetaParentSession = "dsh/parentSession"
	// MetaUsage is a task's token usage per model ("provider/model" to
	// content.Usage).
	MetaUsage = "dsh/usage"
)

// Bounds on what a remote agent can make the provider hold.
const (
	// MaxOutput bounds the text output collected from a task's artifacts,
	// in bytes; the rest is cut off with a marker.
	MaxOutput = 1 << 20
	// MaxResponse bounds one JSON-RPC response body (not a stream), in
	// bytes.
	MaxResponse = 8 << 20
)

// Config configures an A2A provider.
type Config struct {
	// Name is the registry name (default "a2a").
	Name string `yaml:"name"`
	// URL is the agent card's URL (ending in .json), or the agent's base
	// URL or endpoint, below which the card is at
	// /.well-known/agent-card.json.
	URL string `yaml:"url"`
	// TokenEnv names the variable holding the credential, sent as the card
	// declares it: a bearer token (HTTP bearer, OAuth 2 or OpenID Connect
	// schemes) or an API key header. It is never logged.
	TokenEnv string `yaml:"tokenEnv"`
	// ReadyTimeout bounds fetching and checking the card (default 30s);
	// CancelGrace how long a cancelled task may take to reach a terminal
	// state before the run settles aborted anyway (default 5s).
	ReadyTimeout time.Duration `yaml:"readyTimeout"`
	CancelGrace  time.Duration `yaml:"cancelGrace"`
	// PollInterval is the wait between tasks/get calls when the agent does
	// not stream (default 500ms).
	PollInterval time.Duration `yaml:"pollInterval"`
	// MaxDepth is the deepest delegation depth this provider starts a
	// child at (default 4). It also travels in the message's metadata, so
	// that a dsh agent on the other side caps its own tree by it.
	MaxDepth int `yaml:"maxDepth"`

	// Getenv reads TokenEnv (default: none is read).
	Getenv func(string) string `yaml:"-"`
}

// Check fills in the defaults and validates c, returning a
// *subagent.ConfigError that names the offending key.
func (c *Config) Check() error {
	c.Name = cmp.Or(c.Name, Kind)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, 30*time.Second)
	c.CancelGrace = cmp.Or(c.CancelGrace, 5*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, 500*time.Millisecond)
	c.MaxDepth = cmp.Or(c.MaxDepth, 4)
	bad := func(field, format string, args ...any) error {
		return &subagent.ConfigError{Kind: Kind, Provider: c.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if c.URL == "" {
		return bad("url", "is required (the agent card's URL, or the agent's base URL)")
	}
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		return bad("url", "is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return bad("url", "must be an absolute http or https URL, got %q", c.URL)
	case u.User != nil:
		return bad("url", "must not carry credentials (use tokenEnv)")
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"readyTimeout", c.ReadyTimeout}, {"cancelGrace", c.CancelGrace}, {"pollInterval", c.PollInterval}} {
		if d.d < 0 {
			return bad(d.key, "must be positive, got %s", d.d)
		}
	}
	if c.MaxDepth < 0 {
		return bad("maxDepth", "must not be negative, got %d", c.MaxDepth)
	}
	return nil
}

// Provider runs children as tasks on a remote A2A agent.
type Provider struct{ cfg Config }

// New validates cfg and returns a provider.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg}, nil
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: none. An A2A agent takes a
// message, not a persona, a tool filter, a policy or a schema; the depth
// cap is the provider's own (MaxDepth), not the request's.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext implements subagent.Provider: false.
func (p *Provider) InheritsParentContext() bool { return false }

// Start fetches and checks the agent's card, then sends the prompt as a new
// task and returns the run.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	return p.start(ctx, req, remote{})
}

// ResumeRun implements subagent.RemoteContinuer: the follow-up is a new
// message in the conversation (contextId) remote, and in its task when the
// task was waiting for input.
func (p *Provider) ResumeRun(ctx context.Context, req subagent.StartRequest, ref string) (subagent.Run, error) {
	rem, err := parseRemote(ref)
	if err != nil {
		return nil, subagent.NotResumable(p.cfg.Name, err.Error())
	}
	return p.start(ctx, req, rem)
}

func (p *Provider) start(ctx context.Context, req subagent.StartRequest, rem remote) (subagent.Run, error) {
	if err := subagent.CheckLineage(p.cfg.Name, req); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	if req.Depth > p.cfg.MaxDepth {
		return nil, &subagent.Error{Code: subagent.CodeDepthExceeded, Provider: p.cfg.Name, Attempted: req.Depth, Max: p.cfg.MaxDepth,
			Msg: fmt.Sprintf("provider %q: subagent depth %d exceeds its maxDepth %d", p.cfg.Name, req.Depth, p.cfg.MaxDepth)}
	}
	var token string
	if p.cfg.TokenEnv != "" && p.cfg.Getenv != nil {
		token = p.cfg.Getenv(p.cfg.TokenEnv)
	}
	hc := newHTTP()
	ready, cancel := context.WithTimeoutCause(ctx, p.cfg.ReadyTimeout,
		&childproc.ReadyTimeoutError{After: p.cfg.ReadyTimeout, Waiting: "agent card"})
	ep, err := p.resolve(ready, hc, token)
	cancel()
	if err != nil {
		hc.close()
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, &childproc.StartError{Kind: Kind, Provider: p.cfg.Name, Stage: "card", Err: err}
	}
	if rem.context == "" {
		// The conversation is named before the agent answers, so that the
		// child can be continued whatever becomes of its first task.
		rem.context = uuid.NewString()
	}
	r := &run{cfg: p.cfg, id: "a2a-" + uuid.NewString(), http: hc, ep: ep, context: rem.context,
		transport: &rpcClient{url: ep.url, hc: hc.authed(ep, token)},
		progress:  req.Progress, remote: rem, cancelled: make(chan struct{})}
	r.stopParent = context.AfterFunc(ctx, r.cancel)
	go r.drive(r.message(req, rem))
	return r, nil
}

// message is the task's first message: the prompt's text, in the
// conversation (and task) rem when it continues one, with the lineage a dsh
// agent on the other side reads.
func (r *run) message(req subagent.StartRequest, rem remote) *a2a.MessageSendParams {
	var parts []a2a.Part
	for _, b := range req.Prompt {
		if b.Text != "" {
			parts = append(parts, a2a.TextPart{Text: b.Text})
		}
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	msg.ContextID, msg.TaskID = rem.context, a2a.TaskID(rem.task)
	msg.Metadata = map[string]any{MetaDepth: req.Depth, MetaMaxDepth: r.cfg.MaxDepth, MetaParentSession: req.Parent.ID()}
	return &a2a.MessageSendParams{Message: msg, Config: &a2a.MessageSendConfig{AcceptedOutputModes: []string{"text/plain", "text"}}}
}

// remote names a conversation on the agent: its contextId, and the task
// waiting for input in it ("" when none).
type remote struct{ context, task string }

func (r remote) String() string {
	if r.task == "" {
		return r.context
	}
	return r.context + "#" + r.task
}

func parseRemote(s string) (remote, error) {
	var r remote
	r.context, r.task, _ = strings.Cut(s, "#")
	if r.context == "" {
		return r, errors.New("the child's conversation has no A2A context id")
	}
	return r, nil
}
