package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/subagent"
)

// childTree shows child runs live on a terminal as an indented tree: one
// line when a child starts, one per tool it calls, one when it ends with its
// status, elapsed time and tokens.
type childTree struct {
	out   io.Writer
	mu    sync.Mutex
	depth map[string]int // agent id → depth below the top-level agent
	start map[string]time.Time
}

// watchChildren prints child activity from bus to out until the returned
// stop is called.
func watchChildren(bus *event.Bus, out io.Writer) (stop func()) {
	t := &childTree{out: out, depth: map[string]int{}, start: map[string]time.Time{}}
	return bus.Subscribe(t.event)
}

func (t *childTree) event(e event.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e := e.(type) {
	case subagent.Started:
		d := t.depth[e.ParentID] + 1
		t.depth[e.ChildID] = d
		t.start[e.RunID] = time.Now()
		t.line(d, "↳ %s · %s · started", e.Provider, label(e.RunInfo))
	case subagent.ProgressEvent:
		if e.Kind == subagent.ProgressToolCall {
			t.line(t.depth[e.ChildID]+1, "· %s", e.Tool)
		}
	case mcptool.Progress:
		done := fmt.Sprint(e.Progress)
		if e.Total > 0 {
			done += fmt.Sprintf("/%v", e.Total)
		}
		t.line(t.depth[e.AgentID]+1, "· %s %s %s", e.Tool, done, clip(e.Message, 120))
	case subagent.Ended:
		elapsed := time.Since(t.start[e.RunID]).Round(time.Millisecond)
		var u content.Usage
		for _, m := range e.Usage {
			u = u.Add(m)
		}
		cost := ""
		if e.CostUSD > 0 {
			cost = fmt.Sprintf(" · $%.4f", e.CostUSD)
		}
		t.line(t.depth[e.ChildID], "↳ %s · %s · %s in %s · tokens in %d out %d%s", e.Provider, label(e.RunInfo), e.StopReason,
			elapsed, u.Input+u.CacheRead, u.Output, cost)
		delete(t.start, e.RunID)
	}
}

func label(info subagent.RunInfo) string {
	if info.Label != "" {
		return info.Label
	}
	return info.ChildID
}

func (t *childTree) line(depth int, format string, args ...any) {
	fmt.Fprintf(t.out, "%s%s\n", strings.Repeat("  ", depth), fmt.Sprintf(format, args...))
}
