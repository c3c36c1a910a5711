package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
)

// childRow is one child run in the live panel.
type childRow struct {
	info           subagent.RunInfo
	started, ended time.Time
	status         string // "running", "stopping", or how it ended (its stop reason)
	why            string // the first line of an unsuccessful run's diagnostic
	tool           string // the tool it is running now
	callID         string // that tool call's id
	usage          content.Usage
	task           string // the id of the background task that runs it; "" in the foreground
	child          string // a continuable child's short id, which /kill takes; "" for others
}

// handle is what /kill takes for the row: its task id, else its
// continuable child's short id.
func (r *childRow) handle() string { return cmp.Or(r.task, r.child) }

func (r *childRow) running() bool { return r.ended.IsZero() }

// children is the live panel's model: the child runs of this conversation,
// as a tree. A run in the foreground stays listed until the next prompt; a
// background one until its task is read or killed.
type children struct {
	rows   []*childRow // in start order
	byRun  map[string]*childRow
	linked map[string]bool // background task ids with a row
}

func newChildren() *children {
	return &children{byRun: map[string]*childRow{}, linked: map[string]bool{}}
}

// start adds the row of a run that started. A direct child of root is
// linked to the background subagent task of the same label that no row has
// yet, if any: the task is listed before it starts its run, and the run's
// events carry no task id, so the label is the link. The oldest running
// task is taken first; failing that, the newest unread one, since a child
// may have finished before its start event is handled here.
func (c *children) start(e subagent.Started, root string, tasks []task.Snapshot, continuable func(childID string) bool,
	now time.Time) *childRow {
	r := &childRow{info: e.RunInfo, started: now, status: "running"}
	if e.ParentID == root && continuable(e.ChildID) {
		r.child = shortID(e.ChildID)
	} else if e.ParentID == root {
		label := strings.Join(strings.Fields(e.Label), " ")
		candidate := func(t task.Snapshot) bool {
			return t.Kind == subagenttool.TaskKind && t.Label == label && !c.linked[t.ID]
		}
		i := slices.IndexFunc(tasks, func(t task.Snapshot) bool { return candidate(t) && t.Status == task.Running })
		if i < 0 {
			for j := len(tasks) - 1; j >= 0 && i < 0; j-- {
				if candidate(tasks[j]) && !tasks[j].Reported {
					i = j
				}
			}
		}
		if i >= 0 {
			r.task, c.linked[tasks[i].ID] = tasks[i].ID, true
		}
	}
	c.rows = append(c.rows, r)
	c.byRun[e.RunID] = r
	return r
}

// progress records what a running child does now.
func (c *children) progress(e subagent.ProgressEvent) {
	r := c.byRun[e.RunID]
	if r == nil || !r.running() {
		return
	}
	switch e.Kind {
	case subagent.ProgressToolCall:
		r.tool, r.callID = e.Tool, e.CallID
	case subagent.ProgressToolResult, subagent.ProgressTurnEnd:
		if e.CallID == r.callID || e.Kind == subagent.ProgressTurnEnd {
			r.tool, r.callID = "", ""
		}
	}
}

// end records how a run ended and returns its row (nil when unknown).
func (c *children) end(e subagent.Ended, now time.Time) *childRow {
	r := c.byRun[e.RunID]
	if r == nil {
		return nil
	}
	r.ended, r.status, r.tool = now, string(e.StopReason), ""
	var u content.Usage
	for _, m := range e.Usage {
		u = u.Add(m)
	}
	r.usage = u
	if e.StopReason != subagent.Completed && e.Diagnostic != "" {
		r.why, _, _ = strings.Cut(strings.TrimSpace(e.Diagnostic), "\n")
	}
	return r
}

// clearFinished drops the ended runs of the foreground, and their ended
// descendants.
func (c *children) clearFinished() {
	c.drop(func(r *childRow) bool { return !r.running() && r.task == "" })
}

// refresh follows the background tasks: a stopping task shows as such; a
// task that was read or killed, once its run ended, or that is gone, leaves
// the panel. usage gives the tokens of a local child so far.
func (c *children) refresh(tasks []task.Snapshot, usage func(childID string) (content.Usage, bool)) {
	byID := map[string]task.Snapshot{}
	for _, t := range tasks {
		byID[t.ID] = t
	}
	c.drop(func(r *childRow) bool {
		if r.task == "" {
			return false
		}
		t, ok := byID[r.task]
		if r.running() && ok && t.Status == task.Stopping {
			r.status = "stopping"
		}
		return !ok || (t.Reported && !r.running())
	})
	for _, r := range c.rows {
		if r.running() && r.info.Local {
			if u, ok := usage(r.info.ChildID); ok {
				r.usage = u
			}
		}
	}
}

// drop removes the rows gone says to, with every ended row below them.
func (c *children) drop(gone func(*childRow) bool) {
	dead := map[string]bool{} // child ids of dropped rows
	c.rows = slices.DeleteFunc(c.rows, func(r *childRow) bool {
		if gone(r) || (dead[r.info.ParentID] && !r.running()) {
			dead[r.info.ChildID] = true
			delete(c.byRun, r.info.RunID)
			delete(c.linked, r.task)
			return true
		}
		return false
	})
}

// live counts the runs that have not ended.
func (c *children) live() int {
	n := 0
	for _, r := range c.rows {
		if r.running() {
			n++
		}
	}
	return n
}

// tree returns the rows in tree order with their depths: each run under
// the run whose child started it, siblings in start order.
func (c *children) tree() ([]*childRow, []int) {
	kids := map[string][]*childRow{}
	known := map[string]bool{}
	for _, r := range c.rows {
		known[r.info.ChildID] = true
	}
	var roots []*childRow
	for _, r := range c.rows {
		if known[r.info.ParentID] && r.info.ParentID != r.info.ChildID {
			kids[r.info.ParentID] = append(kids[r.info.ParentID], r)
		} else {
			roots = append(roots, r)
		}
	}
	var rows []*childRow
	var depths []int
	seen := map[*childRow]bool{}
	var walk func(r *childRow, d int)
	walk = func(r *childRow, d int) {
		if seen[r] {
			return
		}
		seen[r] = true
		rows, depths = append(rows, r), append(depths, d)
		for _, k := range kids[r.info.ChildID] {
			walk(k, d+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return rows, depths
}

// summary says what the run is and does, or how it ended.
func (r *childRow) summary(now time.Time) string {
	var b strings.Builder
	b.WriteString(r.info.Provider + " · " + label(r.info))
	if h := r.handle(); h != "" {
		b.WriteString(" · " + h)
	}
	if r.running() {
		fmt.Fprintf(&b, " · %s %s", r.status, elapsed(now.Sub(r.started)))
	} else {
		fmt.Fprintf(&b, " · %s in %s", r.status, elapsed(r.ended.Sub(r.started)))
	}
	if r.why != "" {
		b.WriteString(": " + r.why)
	}
	if n := r.usage.Input + r.usage.CacheRead + r.usage.Output; n > 0 {
		b.WriteString(" · " + tokens(n) + " tokens")
	}
	if r.tool != "" {
		b.WriteString(" · " + r.tool)
	}
	return b.String()
}

// line renders a row of the panel at depth, in at most width cells: on a
// narrow terminal the label is shortened first, so that the status, time
// and tokens stay.
func (r *childRow) line(now time.Time, depth, width int) string {
	lead := strings.Repeat("  ", depth) + "↳ "
	full := r.summary(now)
	room := width - ansi.StringWidth(lead)
	if over := ansi.StringWidth(oneLine(full, 1<<20)) - room; over > 0 {
		l := oneLine(label(r.info), 1<<20)
		if w := ansi.StringWidth(l); w > 8 {
			short := ansi.Truncate(l, max(w-over, 8), "…")
			info := r.info
			info.Label = short
			rr := *r
			rr.info = info
			full = rr.summary(now)
		}
	}
	return lead + oneLine(full, room)
}

// byHandle returns the running row of a continuable child whose short id
// is h.
func (c *children) byHandle(h string) *childRow {
	for _, r := range c.rows {
		if r.child != "" && r.child == h && r.running() {
			return r
		}
	}
	return nil
}

// byChild returns the newest row of the continuable child whose short id,
// or id, or a prefix of its id of at least 4 characters, is h.
func (c *children) byChild(h string) *childRow {
	h = strings.TrimSpace(h)
	for i := len(c.rows) - 1; i >= 0; i-- {
		r := c.rows[i]
		if r.child != "" && (r.child == h || (len(h) >= 4 && strings.HasPrefix(r.info.ChildID, h))) {
			return r
		}
	}
	return nil
}

// label names a run for a person: its label, else its child's id.
func label(info subagent.RunInfo) string {
	if l := strings.TrimSpace(info.Label); l != "" {
		return l
	}
	return info.ChildID
}

// childList renders stored children (a listing of subagent.Service) under
// head, one per line, indented by depth.
func childList(head string, rows []subagent.ChildRow) string {
	var b strings.Builder
	b.WriteString(head + ":")
	for _, r := range rows {
		b.WriteString("\n" + strings.Repeat("  ", r.Depth) + childRowLine(r))
	}
	return b.String()
}
