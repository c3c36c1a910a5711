package temporal

import (
	"context"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/subagent"
)

// depthCaps holds the depth cap each child a worker runs got from its
// parent, by the child's session id: the root of its tree on the worker.
type depthCaps struct {
	mu   sync.Mutex
	caps map[string]int
}

func (c *depthCaps) set(id string, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caps == nil {
		c.caps = map[string]int{}
	}
	c.caps[id] = max
}

func (c *depthCaps) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.caps, id)
}

// capped is a provider of a worker's runtime that holds the children of a
// temporal child to their parent's depth cap.
type capped struct {
	subagent.Provider
	caps *depthCaps
}

// Start refuses a start deeper than the cap of the tree it is in
// (DEPTH_EXCEEDED), and passes the cap on with the request.
func (p capped) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	if req.Parent != nil {
		root := req.Parent
		for root.Owner() != nil {
			root = root.Owner()
		}
		p.caps.mu.Lock()
		limit, ok := p.caps.caps[root.ID()]
		p.caps.mu.Unlock()
		if ok {
			if req.Depth > limit {
				return nil, &subagent.Error{Code: subagent.CodeDepthExceeded, Provider: p.Name(), Attempted: req.Depth, Max: limit,
					Msg: fmt.Sprintf("subagent depth %d exceeds maxDepth %d, the cap of the temporal child's parent", req.Depth, limit)}
			}
			if req.MaxDepth == nil || *req.MaxDepth > limit {
				req.MaxDepth = &limit
			}
		}
	}
	return p.Provider.Start(ctx, req)
}
