package acpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
	"github.com/dsh-go/dsh/tool/toolname"
)

// terminalCallTimeout bounds one terminal/* request to the client but
// terminal/wait_for_exit, which the command's timeout bounds.
const terminalCallTimeout = 30 * time.Second

// clientBash runs a session's bash calls in the client's terminal
// (terminal/create, terminal/wait_for_exit, terminal/output,
// terminal/release; terminal/kill when the call is cancelled or times
// out), so that the editor shows the command running. The terminal is the
// editor's process, outside dsh's sandbox: it is used only for the root
// agent's calls when the sandbox of commands is full; other calls run
// through local.
type clientBash struct {
	s     *server
	id    acpsdk.SessionId
	root  *agent.Agent
	local tool.Definition
	shown func(callID, terminalID string) // the tool call shows the terminal
}

// runsInTerminal reports whether a call goes to the client's terminal:
// the root agent's, with the sandbox full (a context that narrows it keeps
// the call local).
func (b clientBash) runsInTerminal(ctx context.Context, call tool.Call) bool {
	mode := b.s.opts.Commands.Sandbox
	if m, ok := sandbox.FromContext(ctx); ok {
		mode = sandbox.Narrow(mode, m)
	}
	return mode == sandbox.Full && b.s.opts.Commands.Network != sandbox.NetworkDeny && call.Caller == b.root
}

// request bounds a terminal request: terminalCallTimeout, and the end of
// the client's input. It is not ended by the call's context, so that the
// terminal is killed and released after a cancel.
func (b clientBash) request() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), terminalCallTimeout)
	stop := context.AfterFunc(b.s.input, cancel)
	return ctx, func() { stop(); cancel() }
}

func (b clientBash) execute(ctx context.Context, call tool.Call) (tool.Result, error) {
	if !b.runsInTerminal(ctx, call) {
		return b.local.Execute(ctx, call) // redacted by builtin
	}
	res, err := b.inTerminal(ctx, call)
	redact := b.s.opts.Commands.Redact
	if redact == nil {
		return res, err
	}
	// The editor's environment may hold what dsh's scrubbed one would
	// not: the result is redacted as dsh's own bash's.
	for i, block := range res.Content {
		if block.Type == content.TypeText {
			res.Content[i].Text = redact(block.Text)
		}
	}
	var te *tool.Error
	if errors.As(err, &te) {
		err = &tool.Error{Code: te.Code, Msg: redact(te.Msg)}
	} else if err != nil {
		err = errors.New(redact(err.Error()))
	}
	return res, err
}

// inTerminal runs a bash call in a new terminal of the client's.
func (b clientBash) inTerminal(ctx context.Context, call tool.Call) (tool.Result, error) {
	var args struct {
		Command   string `json:"command"`
		TimeoutMS int    `json:"timeout_ms"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "bash: %v", err)
	}
	timeout := b.s.opts.Commands.BashTimeout
	switch {
	case args.TimeoutMS < 0:
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "timeout_ms must not be negative")
	case args.TimeoutMS > 0:
		timeout = min(time.Duration(args.TimeoutMS)*time.Millisecond, builtin.MaxBashTimeout)
	}
	if timeout <= 0 {
		timeout = builtin.DefaultBashTimeout
	}
	limit := b.s.opts.Commands.OutputLimit
	if limit <= 0 {
		limit = tool.DefaultOutputLimit
	}
	cwd := call.Cwd
	conn := b.s.connection()
	rctx, cancel := b.request()
	created, err := conn.CreateTerminal(rctx, acpsdk.CreateTerminalRequest{SessionId: b.id, Command: "bash",
		Args: []string{"-c", args.Command}, Cwd: &cwd, OutputByteLimit: &limit})
	cancel()
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot run the command in the client's terminal: %v", err)
	}
	term := created.TerminalId
	defer func() {
		rctx, cancel := b.request()
		defer cancel()
		if _, err := conn.ReleaseTerminal(rctx, acpsdk.ReleaseTerminalRequest{SessionId: b.id, TerminalId: term}); err != nil {
			b.s.opts.Log.Debug("acp: terminal/release failed", "session", b.id, "terminal", term, "err", err)
		}
	}()
	b.shown(call.ID, term)

	wctx, wcancel := context.WithTimeout(ctx, timeout)
	stop := context.AfterFunc(b.s.input, wcancel)
	exit, waitErr := conn.WaitForTerminalExit(wctx, acpsdk.WaitForTerminalExitRequest{SessionId: b.id, TerminalId: term})
	stop()
	timedOut := errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	wcancel()
	if waitErr != nil {
		rctx, cancel := b.request()
		if _, err := conn.KillTerminal(rctx, acpsdk.KillTerminalRequest{SessionId: b.id, TerminalId: term}); err != nil {
			b.s.opts.Log.Debug("acp: terminal/kill failed", "session", b.id, "terminal", term, "err", err)
		}
		cancel()
	}
	rctx, cancel = b.request()
	out, outErr := conn.TerminalOutput(rctx, acpsdk.TerminalOutputRequest{SessionId: b.id, TerminalId: term})
	cancel()
	text := out.Output
	if len(text) > limit { // a client that ignored outputByteLimit
		text, out.Truncated = tail(text, limit), true
	}
	if out.Truncated {
		text = "(the beginning of the output is omitted)\n" + text
	}
	switch {
	case ctx.Err() != nil:
		return tool.Result{}, fmt.Errorf("command aborted: %w", ctx.Err())
	case timedOut:
		return textResult(builtin.CodeTimeout, fmt.Sprintf("%scommand timed out after %v and was killed", withNL(text), timeout)), nil
	case waitErr != nil:
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "the client's terminal failed: %v", waitErr)
	case outErr != nil:
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot read the client's terminal: %v", outErr)
	case exit.Signal != nil:
		return textResult(builtin.CodeExitStatus, fmt.Sprintf("%scommand killed by signal %s", withNL(text), *exit.Signal)), nil
	case exit.ExitCode != nil && *exit.ExitCode != 0:
		return textResult(builtin.CodeExitStatus, fmt.Sprintf("%sexit code %d", withNL(text), *exit.ExitCode)), nil
	case text == "":
		return tool.TextResult("(no output)"), nil
	}
	return tool.TextResult(text), nil
}

// textResult is an error result showing text as is.
func textResult(code, text string) tool.Result {
	r := tool.TextResult(text)
	r.IsError, r.Code = true, code
	return r
}

// tail returns the last n bytes of s at most, from a rune's start.
func tail(s string, n int) string {
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

// withNL returns s ending in a newline, or empty.
func withNL(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// useClientTerminal is the Setup step that runs the session's bash in the
// client's terminal, when the client offered terminal and the sandbox of
// commands is full.
func (s *server) useClientTerminal(id acpsdk.SessionId, u *updater) func(*agent.Agent) error {
	s.mu.Lock()
	offered := s.clientTerminal
	s.mu.Unlock()
	if !offered || s.opts.Commands == nil || s.opts.Commands.Sandbox != sandbox.Full {
		return nil
	}
	return func(a *agent.Agent) error {
		if !a.Tools().Has(toolname.Bash) {
			return nil
		}
		var local tool.Definition
		for _, def := range builtin.Tools(*s.opts.Commands) {
			if def.Name == toolname.Bash {
				local = def
			}
		}
		if local.Execute == nil {
			return nil
		}
		b := clientBash{s: s, id: id, root: a, local: local, shown: u.terminal}
		def := local
		def.Execute = b.execute
		_, err := a.Tools().Register(def)
		return err
	}
}
