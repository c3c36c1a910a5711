package continuable

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// ListChildren implements subagent.Continuation: see subagent.Service.ListChildren.
func (c *manager) ListChildren(ctx context.Context, parentID string) ([]subagent.ChildRow, error) {
	corpus, err := c.corpus(ctx)
	if err != nil {
		return nil, err
	}
	return c.rows(ctx, corpus, corpus.children[parentID], 1)
}

// ListDescendants implements subagent.Continuation: see subagent.Service.ListDescendants.
func (c *manager) ListDescendants(ctx context.Context, rootID string) ([]subagent.ChildRow, error) {
	corpus, err := c.corpus(ctx)
	if err != nil {
		return nil, err
	}
	type node struct {
		h     session.Header
		depth int
	}
	var order []node
	seen := map[string]bool{rootID: true}
	stack := []node{}
	push := func(parent string, depth int) {
		kids := corpus.children[parent]
		for i := len(kids) - 1; i >= 0; i-- {
			if !seen[kids[i].ID] {
				seen[kids[i].ID] = true
				stack = append(stack, node{kids[i], depth})
			}
		}
	}
	push(rootID, 1)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		order = append(order, n)
		push(n.h.ID, n.depth+1)
	}
	headers := make([]session.Header, len(order))
	for i, n := range order {
		headers[i] = n.h
	}
	rows, err := c.rows(ctx, corpus, headers, 0)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i].Depth = order[i].depth
	}
	return rows, nil
}

// corpus is what a listing reads: every session's header, stored ones
// overlaid by live ones, and the subagent children of each session.
type corpus struct {
	live     map[string]*session.Session
	children map[string][]session.Header // by parent, oldest first
}

func (c *manager) corpus(ctx context.Context) (*corpus, error) {
	if ctx.Err() != nil {
		return nil, cancelled(ctx)
	}
	stored, err := c.sessions.List()
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, cancelled(ctx)
	}
	byID := map[string]session.Header{}
	for _, h := range stored {
		byID[h.ID] = h
	}
	co := &corpus{live: map[string]*session.Session{}, children: map[string][]session.Header{}}
	for _, id := range c.sessions.Live() {
		if s, ok := c.sessions.Get(id); ok {
			co.live[id] = s
			byID[id] = s.Header()
		}
	}
	for _, h := range byID {
		if h.Origin == session.OriginSubagent && h.ParentSession != "" {
			co.children[h.ParentSession] = append(co.children[h.ParentSession], h)
		}
	}
	for _, kids := range co.children {
		slices.SortFunc(kids, func(a, b session.Header) int {
			return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
	}
	return co, nil
}

// rows classifies headers, reading each stored one once (at most four at
// a time) and no live one; depth is 0 for descendants, set by the caller.
func (c *manager) rows(ctx context.Context, co *corpus, headers []session.Header, depth int) ([]subagent.ChildRow, error) {
	rows := make([]subagent.ChildRow, len(headers))
	keep := make([]bool, len(headers))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, h := range headers {
		rows[i] = subagent.ChildRow{ID: h.ID, Parent: h.ParentSession, Depth: depth, HasChildren: len(co.children[h.ID]) > 0}
		if s, ok := co.live[h.ID]; ok {
			d, ok := subagent.Identity(s.Events())
			keep[i] = ok // no descriptor yet: still being created
			rows[i].Live, rows[i].Mode, rows[i].Label, rows[i].Remote = true, d.Mode, d.Label, d.Remote
			continue
		}
		keep[i] = true
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if ctx.Err() != nil {
				return
			}
			sh, events, err := c.sessions.Read(h.ID)
			switch {
			case err != nil:
				rows[i].Diagnostic = subagent.DiagnosticUnavailable
				if errorsIsCorrupt(err) {
					rows[i].Diagnostic = subagent.DiagnosticCorrupt
				}
			case sh.ParentSession != h.ParentSession || sh.Origin != h.Origin:
				rows[i].Diagnostic = subagent.DiagnosticCorrupt
			default:
				if d, ok := subagent.Identity(events); ok {
					rows[i].Mode, rows[i].Label, rows[i].Remote = d.Mode, d.Label, d.Remote
				} else {
					rows[i].Diagnostic = subagent.DiagnosticCorrupt
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, cancelled(ctx)
	}
	out := rows[:0]
	for i, r := range rows {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out, nil
}

func errorsIsCorrupt(err error) bool {
	return errors.Is(err, &session.Error{Code: session.CodeCorrupt}) || errors.Is(err, &session.Error{Code: session.CodeFormat})
}

func cancelled(ctx context.Context) error {
	return &subagent.Error{Code: subagent.CodeCancelled, Msg: "listing cancelled", Err: context.Cause(ctx)}
}
