package task

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// ToolOptions configure the task tools.
type ToolOptions struct {
	WaitTimeout    time.Duration // task_output's default wait (default 30s)
	MaxWaitTimeout time.Duration // cap on timeout_ms (default 10m)
	OutputLimit    int           // bytes of output a read returns, tail kept (default 30000)
	MaxWakes       int           // consecutive turns notices may open (default 3)
}

func (o *ToolOptions) defaults() {
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 30 * time.Second
	}
	if o.MaxWaitTimeout <= 0 {
		o.MaxWaitTimeout = 10 * time.Minute
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = 30000
	}
	if o.MaxWakes <= 0 {
		o.MaxWakes = 3
	}
}

// GuidanceSection is the prompt section the task tools add.
const GuidanceSection = "tool:tasks"

// NoticePlugin is the plugin source of completion notices.
const NoticePlugin = "task"

// The names of the task tools Mount registers.
const (
	ToolList   = "task_list"
	ToolOutput = "task_output"
	ToolKill   = "task_kill"
)

// Mount registers task_list, task_output and task_kill, their prompt
// guidance, and the delivery of completion notices to owners. It returns
// the disposer of all of it.
func Mount(r *Runtime, tools *tool.Registry, prompts *prompt.Registry, opts ToolOptions) (dispose func(), err error) {
	opts.defaults()
	var disposers []func()
	undo := func() {
		for i := len(disposers) - 1; i >= 0; i-- {
			disposers[i]()
		}
	}
	for _, def := range []tool.Definition{listTool(r), outputTool(r, opts), killTool(r)} {
		d, err := tools.Register(def)
		if err != nil {
			undo()
			return nil, err
		}
		disposers = append(disposers, d)
	}
	d, err := prompts.Section(prompt.Section{Name: GuidanceSection, Order: 106, Text: "Background tasks: keep track of the ids of " +
		"tasks you start. Don't poll them in a loop; you are told when one finishes. Collect the output of every task that " +
		"matters with task_output before your final answer, and stop tasks that no longer matter with task_kill."})
	if err != nil {
		undo()
		return nil, err
	}
	disposers = append(disposers, d, event.On(r.bus, func(e Done) { r.deliver(e, opts) }))
	return undo, nil
}

func caller(call tool.Call) (*agent.Agent, error) {
	a, ok := call.Caller.(*agent.Agent)
	if !ok || a == nil {
		return nil, tool.Errorf(tool.CodeFailed, "task tools require a calling agent")
	}
	return a, nil
}

func status(s Snapshot) string {
	if s.Detail != "" {
		return fmt.Sprintf("[status: %s, %s]", s.Status, s.Detail)
	}
	return fmt.Sprintf("[status: %s]", s.Status)
}

func listTool(r *Runtime) tool.Definition {
	return tool.Func(ToolList, "List your background tasks: one line each with id, kind, status and label.", true,
		func(ctx context.Context, call tool.Call, _ struct{}) (tool.Result, error) {
			a, err := caller(call)
			if err != nil {
				return tool.Result{}, err
			}
			var lines []string
			for _, s := range r.List(a) {
				lines = append(lines, fmt.Sprintf("%s [%s] %s — %s", s.ID, s.Kind, s.Status, s.Label))
			}
			if len(lines) == 0 {
				return tool.TextResult("(no background tasks)"), nil
			}
			return tool.TextResult(strings.Join(lines, "\n")), nil
		})
}

type outputArgs struct {
	TaskID    string `json:"task_id" jsonschema:"the id of the task"`
	Wait      bool   `json:"wait,omitempty" jsonschema:"wait for the task to finish, up to timeout_ms"`
	TimeoutMS int    `json:"timeout_ms,omitempty" jsonschema:"how long to wait, in milliseconds"`
}

func outputTool(r *Runtime, opts ToolOptions) tool.Definition {
	desc := fmt.Sprintf("Read a background task's output and status. With wait, block until it finishes or timeout_ms "+
		"passes (default %d, at most %d); a timed-out wait leaves the task running.", opts.WaitTimeout.Milliseconds(), opts.MaxWaitTimeout.Milliseconds())
	return tool.Func(ToolOutput, desc, true, func(ctx context.Context, call tool.Call, args outputArgs) (tool.Result, error) {
		a, err := caller(call)
		if err != nil {
			return tool.Result{}, err
		}
		if args.TimeoutMS < 0 {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "timeout_ms must not be negative")
		}
		if args.Wait {
			timeout := opts.WaitTimeout
			if args.TimeoutMS > 0 {
				timeout = opts.MaxWaitTimeout
				if int64(args.TimeoutMS) < opts.MaxWaitTimeout.Milliseconds() {
					timeout = time.Duration(args.TimeoutMS) * time.Millisecond
				}
			}
			if _, err := r.Wait(ctx, args.TaskID, a, timeout); err != nil {
				return tool.Result{}, err
			}
		}
		out, snap, err := r.Read(args.TaskID, a)
		if err != nil {
			return tool.Result{}, err
		}
		text := tail(out.Output, opts.OutputLimit)
		if text == "" {
			text = "(no new output)"
		}
		return tool.Result{Content: []content.Block{content.Text(text + "\n" + status(snap))}}, nil
	})
}

type killArgs struct {
	TaskID string `json:"task_id" jsonschema:"the id of the task"`
	Reason string `json:"reason,omitempty" jsonschema:"why it is no longer needed"`
}

func killTool(r *Runtime) tool.Definition {
	return tool.Func(ToolKill, "Stop a background task that no longer matters.", true,
		func(ctx context.Context, call tool.Call, args killArgs) (tool.Result, error) {
			a, err := caller(call)
			if err != nil {
				return tool.Result{}, err
			}
			finished, snap, err := r.Kill(args.TaskID, a, args.Reason)
			if err != nil {
				return tool.Result{}, err
			}
			if finished {
				return tool.TextResult(fmt.Sprintf("task %s had already finished %s", snap.ID, status(snap))), nil
			}
			return tool.TextResult("requested cancellation of task " + snap.ID), nil
		})
}

// tail keeps the last limit bytes of s, on a rune boundary.
func tail(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := len(s) - limit
	for cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut++
	}
	return fmt.Sprintf("[… %d bytes omitted …]\n%s", cut, s[cut:])
}

// Notice returns the completion notice of a task.
func Notice(s Snapshot) content.Message {
	text := fmt.Sprintf("background task %s (%s: %s) finished %s. Read its output with task_output.", s.ID, s.Kind, s.Label, status(s))
	m := content.UserText(text)
	m.Source = content.Source{Kind: content.SourcePlugin, Plugin: NoticePlugin, Form: "notice"}
	return m
}

// deliver tells a task's owner that it finished. While the owner has not
// been woken MaxWakes times in a row by notices, the notice is steered in:
// it joins the running turn at its next step, or wakes an idle owner with a
// new turn. Past that budget, or for a task the user stopped (Stop), it
// waits, without waking, for the next turn. No notice follows a task whose
// outcome the owner already read (a task_output that waited for it, a
// task_kill), and one still queued when
// the owner reads the outcome is withdrawn: the owner pays no model step to
// hear what it already knows.
func (r *Runtime) deliver(e Done, opts ToolOptions) {
	owner := e.Owner
	if owner == nil || owner.Disposed() || owner.ToolHost() { // a tool host's client reads it with task_output
		return
	}
	msg := Notice(e.Task)
	r.mu.Lock()
	rec := r.tasks[e.Task.ID]
	if rec == nil || rec.snap.Reported {
		r.mu.Unlock()
		return
	}
	rec.notice = msg.ID
	rec.delivering = true
	hushed := rec.hushed
	r.mu.Unlock()
	var err error
	if !hushed && wakesSinceUser(owner.Session().Events()) < opts.MaxWakes {
		err = owner.Steer(msg)
	} else {
		err = owner.Inject(msg)
	}
	if err != nil && !errors.Is(err, &agent.Error{Code: agent.CodeDisposed}) {
		r.log.Warn("task: completion notice not delivered", "task", e.Task.ID, "owner", owner.ID(), "err", err)
	}
	// A read between the check above and the send could not withdraw a
	// notice not yet queued: withdraw it here.
	r.mu.Lock()
	late := rec.snap.Reported && rec.notice == ""
	r.mu.Unlock()
	if late {
		rec.withdraw(msg.ID)
	}
	r.mu.Lock()
	rec.delivering = false
	r.delivered.Broadcast()
	r.mu.Unlock()
}

// wakesSinceUser counts the turns that task notices opened since the owner
// last claimed a user-sourced message (see agent.WakesSinceUser).
func wakesSinceUser(events []session.Event) int {
	return agent.WakesSinceUser(events, func(s content.Source) bool { return s.Plugin == NoticePlugin })
}
