// Package tui is dsh's interactive terminal: one conversation with a
// top-level agent, its answer streaming as it comes, its reasoning in a
// collapsible block, the children of the conversation as a live tree,
// permission asks answered inline, slash commands and a multi-line editor.
//
// cmd/dsh starts it for `dsh` on a terminal and for `dsh chat`; no other
// command calls into it, and it does nothing (no terminal query, no
// goroutine) until Run.
//
// The runtime delivers its events synchronously, on the goroutines of the
// agents and children that emit them. The UI never runs there: a feed (a
// bounded queue with a drop counter) takes each event and returns, and the
// screen reads the feed in batches, so a slow terminal cannot slow a child.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/task"
)

// Options configure the UI.
type Options struct {
	// Runtime is the runtime the conversation's agents live in.
	Runtime *dsh.Runtime
	// In and Out are the terminal: keys are read from In, the screen is
	// drawn on Out.
	In, Out *os.File
	// Model names the model route and id, for the status line and /model.
	Model string
	// Routes are the configured model routes, for /model.
	Routes []string
	// Spent renders a usage by "route/model" as one line with its cost, for
	// /cost (nil: tokens only).
	Spent func(map[string]content.Usage) string
	// Sessions lists the stored sessions, for /sessions (nil: unavailable).
	Sessions func() (string, error)
	// Resume continues stored sessions, for /resume (nil: unavailable).
	Resume Resumer
	// Prompt, when set, is sent as the conversation's first prompt.
	Prompt string
	// HistoryFile keeps the editor's history across sessions ("": none).
	HistoryFile string
	// ModelOf returns the model id of a route, for /model (nil: the
	// route's own default, "").
	ModelOf func(route string) string
	// Window returns the context window in tokens of "route/model", for
	// the context gauge (nil or 0: unknown, tokens only).
	Window func(model string) int64
	// Permissions describes the permission policy, for /permissions.
	Permissions string
	// MCP describes the configured MCP servers, one per line, for /mcp.
	MCP []string
}

// Resumer continues a stored session as the live conversation, or starts
// a new one.
type Resumer interface {
	// Resume rebuilds the stored session that id names (an id or an
	// unambiguous prefix of one) as a live top-level agent whose
	// permission asks go to asker.
	Resume(ctx context.Context, id string, asker permission.Asker) (*agent.Agent, error)
	// New creates a top-level agent like the first one, on a new session.
	New(ctx context.Context, asker permission.Asker) (*agent.Agent, error)
}

// UI is one interactive session on a terminal. Create it with New, give
// the conversation's agent its Asker, then Run it once.
type UI struct {
	opts  Options
	feed  *feed
	done  chan struct{} // closed when Run returns
	asker *asker
	wg    sync.WaitGroup // goroutines of Run and of slash commands

	ran   atomic.Bool
	mu    sync.Mutex
	saved *term.State // the terminal's mode before Run, while it runs
}

// feedLimit bounds the queue between the runtime and the screen (see feed).
const feedLimit = 4096

// tick is how often elapsed times and tokens so far are redrawn.
const tick = time.Second

// frame is the least time between two batches of the feed: the renderer
// draws at most 60 frames a second, so a batch per delta (200 a second
// from a fast model) built views that were never drawn. Half a frame, not
// a whole one: batches at the renderer's own rate beat against its clock,
// and a frame now and then found nothing new (BENCHMARKS §9.2).
const frame = time.Second / 120

// New returns a UI that is not running yet.
func New(opts Options) *UI {
	u := &UI{opts: opts, feed: newFeed(feedLimit), done: make(chan struct{})}
	u.asker = &asker{feed: u.feed, done: u.done}
	return u
}

// Asker is the asker of the conversation's delegation tree: each ask is
// shown on the screen, naming the agent that asks, until the person
// answers or the call is cancelled. Once the UI has stopped, asks are
// refused.
func (u *UI) Asker() permission.Asker { return u.asker }

// Run runs the conversation with root on the terminal until the person
// exits (Ctrl-C twice, Ctrl-D on an empty editor, /exit) or ctx ends. It
// returns the agent the conversation ended with (another one after
// /resume), and ctx's cause when ctx ended it. It leaves no goroutine
// behind; the caller disposes the agents.
func (u *UI) Run(ctx context.Context, root *agent.Agent) (*agent.Agent, error) {
	if !u.ran.CompareAndSwap(false, true) {
		return root, errors.New("tui: a UI runs once")
	}
	m := newModel(u, root)
	if u.opts.Prompt != "" {
		m.submit(u.opts.Prompt)
	}
	defer func() {
		m.unobserve()
		u.feed.close()
		close(u.done)
		u.wg.Wait()
	}()
	unsubscribe := u.opts.Runtime.Events.Subscribe(u.onBus)
	defer unsubscribe()

	if state, err := term.GetState(u.opts.In.Fd()); err == nil {
		u.mu.Lock()
		u.saved = state
		u.mu.Unlock()
		defer func() {
			u.mu.Lock()
			u.saved = nil
			u.mu.Unlock()
		}()
	}
	// Shift+Enter, where the terminal tells it from Enter (xterm's
	// modifyOtherKeys), inserts a newline.
	io.WriteString(u.opts.Out, "\x1b[>4;1m")
	defer io.WriteString(u.opts.Out, "\x1b[>4m")
	p := tea.NewProgram(m, tea.WithInput(u.opts.In), tea.WithOutput(u.opts.Out), tea.WithAltScreen(),
		tea.WithoutSignalHandler())
	stop := make(chan struct{})
	var pump sync.WaitGroup
	pump.Go(func() { u.pump(ctx, p.Send, stop) })
	_, err := p.Run()
	close(stop)
	pump.Wait()
	// The alternate screen is gone: the conversation goes to the main
	// screen, so that it stays in the terminal's scrollback.
	if t := m.log.render(m.st, max(m.width, 10), !m.showThink, m.expand); t != "" {
		io.WriteString(u.opts.Out, strings.ReplaceAll(t, "\n", "\r\n")+"\r\n")
	}
	if err != nil {
		return m.agent, fmt.Errorf("terminal: %w", err)
	}
	return m.agent, m.exitErr
}

// Abandon gives the terminal back as it was before Run, for a process
// that exits at once while Run still runs (a second signal): it leaves
// the alternate screen, shows the cursor and restores the terminal's
// mode. It does nothing when Run is not running.
func (u *UI) Abandon() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.saved == nil {
		return
	}
	io.WriteString(u.opts.Out, "\x1b[>4m\x1b[?2004l\x1b[?25h\x1b[?1049l")
	term.Restore(u.opts.In.Fd(), u.saved)
}

// pump hands the feed's items to the program (send) in batches, at most
// one a frame, ticks the clock, and tells the program when ctx ends, until
// stop.
func (u *UI) pump(ctx context.Context, send func(tea.Msg), stop <-chan struct{}) {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	next := time.NewTimer(0) // when the feed may be taken again
	defer next.Stop()
	var ready <-chan struct{} // the feed's, once a frame has passed since the last batch
	ctxDone := ctx.Done()
	for {
		select {
		case <-stop:
			return
		case <-next.C:
			ready = u.feed.ready
		case <-ready:
			taken := time.Now()
			items, dropped := u.feed.take()
			send(batchMsg{items: items, dropped: dropped})
			ready = nil
			next.Reset(frame - time.Since(taken))
		case now := <-ticker.C:
			send(tickMsg(now))
		case <-ctxDone:
			ctxDone = nil
			send(endMsg{err: context.Cause(ctx)})
		}
	}
}

// async runs fn on a goroutine Run waits for, and feeds its result to the
// screen; a panic in fn is shown as an error.
func (u *UI) async(fn func() any) {
	u.wg.Go(func() {
		var out any
		defer func() {
			if p := recover(); p != nil {
				out = noteMsg{text: fmt.Sprintf("✗ internal error: %v", p), err: true}
			}
			u.feed.push(out, false)
		}()
		out = fn()
	})
}

// onBus takes the runtime's events the screen shows: child runs, their
// progress (their text excepted), background tasks settling, and top-level
// agents starting and stopping.
func (u *UI) onBus(e event.Event) {
	switch e := e.(type) {
	case subagent.Started, subagent.Ended, task.Done:
		u.feed.push(e, false)
	case subagent.ProgressEvent:
		if e.Kind != subagent.ProgressText {
			u.feed.push(e, false)
		}
	case agent.StatusChanged:
		if e.Agent.Owner() == nil {
			u.feed.push(e, false)
		}
	}
}

// observe feeds the events of a's session to the screen until the
// returned stop is called; streamed deltas are lossy (the step's whole
// message follows them).
func (u *UI) observe(a *agent.Agent) (stop func()) {
	return a.Session().Observe(func(e session.Event) {
		item := sessionEvent{agent: a, e: e}
		switch d := e.Data.(type) {
		case session.AssistantChunk:
			if t := d.Chunk.Type; (t == content.ChunkTextDelta || t == content.ChunkReasoningDelta) && d.Chunk.Text != "" {
				u.feed.push(item, true)
			}
		case session.TurnStart, session.TurnEnd, content.Message, session.AssistantMessage, session.ToolCall,
			session.ToolResult, session.LLMRetry:
			u.feed.push(item, false)
		}
	})
}

// Messages of the program.
type (
	// batchMsg is what the feed held, and how many lossy items it dropped
	// so far.
	batchMsg struct {
		items   []any
		dropped int64
	}
	// tickMsg redraws what ticks: elapsed times, tokens so far.
	tickMsg time.Time
	// endMsg ends the program: the context ended.
	endMsg struct{ err error }
	// sessionEvent is an event of a top-level agent's session.
	sessionEvent struct {
		agent *agent.Agent
		e     session.Event
	}
	// noteMsg is the text a slash command produced off the event loop.
	noteMsg struct {
		text string
		err  bool
	}
	// resumedMsg is the outcome of /resume, or of /clear (fresh).
	resumedMsg struct {
		agent *agent.Agent
		err   error
		fresh bool
	}
)
