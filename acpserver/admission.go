package acpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/subagent"
)

// admitTimeout bounds the wait for a dsh parent's answer to
// acpmeta.MethodAdmit; unanswered, the session's tree falls back to its
// own live-children cap.
const admitTimeout = 30 * time.Second

// countLive returns the setup that makes the tree of session id, whose dsh
// parent admits (see acpmeta.Session.Admits), ask that parent for a place
// under its live-children cap before each start, so that the cap holds
// across processes. Nil when the parent does not admit or the server has
// no subagent service.
func (s *server) countLive(id acpsdk.SessionId, m acpmeta.Session) func(*agent.Agent) error {
	if !m.Admits || s.opts.Subagents == nil {
		return nil
	}
	svc := s.opts.Subagents
	return func(a *agent.Agent) error {
		remove := svc.CountUpstream(a, max(m.MaxLiveChildren, 0), s.admitFromParent(id))
		if !a.OnDispose(remove) {
			remove()
		}
		return nil
	}
}

// admitFromParent asks the dsh parent for a place for a new child of
// session id's tree, and returns its release, which tells the parent.
func (s *server) admitFromParent(id acpsdk.SessionId) subagent.Upstream {
	return func() (func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
		defer cancel()
		raw, err := s.connection().CallExtension(ctx, acpmeta.MethodAdmit, acpmeta.Admit{SessionID: string(id)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", acpmeta.MethodAdmit, err)
		}
		var ans acpmeta.Admitted
		if err := json.Unmarshal(raw, &ans); err != nil {
			return nil, fmt.Errorf("%s: the answer does not decode: %w", acpmeta.MethodAdmit, err)
		}
		switch {
		case ans.Refused != "":
			return nil, &subagent.Error{Code: subagent.CodeLimitReached, Msg: ans.Refused}
		case ans.Slot == "":
			return nil, fmt.Errorf("%s: the answer has neither a slot nor a refusal", acpmeta.MethodAdmit)
		}
		return func() {
			err := s.connection().NotifyExtension(context.Background(), acpmeta.MethodRelease,
				acpmeta.Release{SessionID: string(id), Slot: ans.Slot})
			if err != nil {
				s.opts.Log.Debug("the place of an ended child was not given back to the parent; its end gives it back", "err", err)
			}
		}, nil
	}
}
