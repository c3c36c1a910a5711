package subagent

import (
	"context"
	"fmt"
)

// Out-of-process continuable children.
//
// A product that keeps its own conversations (an ACP agent with
// session/load, Codex with thread/resume, Claude Code with --resume)
// continues a child by the id of its conversation there. The service keeps
// the child's local record: a session of its own (origin subagent, under
// the parent) whose descriptor names the provider and that remote id, and
// whose turns record each message sent and the answer that came back. A
// follow-up to such a child starts a new run of the provider that resumes
// the remote conversation (RemoteContinuer.ResumeRun): its process is
// fresh, its conversation is not. Routing, authority, the one notice per
// activation and interrupts are those of an in-process child. A provider
// whose product cannot continue a conversation refuses the resume with
// NOT_RESUMABLE, saying so.

// RemoteContinuer is an out-of-process provider whose children's
// conversations can be continued by id. Its runs are RemoteRuns.
type RemoteContinuer interface {
	// ResumeRun starts a run that continues the conversation remote with
	// req.Prompt; ctx governs the run as in Provider.Start. A product that
	// cannot continue it fails with a NOT_RESUMABLE *Error.
	ResumeRun(ctx context.Context, req StartRequest, remote string) (Run, error)
}

// ResumeChecker is a RemoteContinuer that knows, before any child exists,
// whether its product will be able to continue a conversation (Codex
// keeps none without a codexHome).
type ResumeChecker interface {
	CanResume() bool
}

// Continues reports whether p can start continuable children: in process
// (Continuer), or out of process through a product that can continue
// their conversations (RemoteContinuer, unless its ResumeChecker says it
// cannot).
func Continues(p Provider) bool {
	if _, ok := p.(Continuer); ok {
		return true
	}
	if _, ok := p.(RemoteContinuer); !ok {
		return false
	}
	rc, ok := p.(ResumeChecker)
	return !ok || rc.CanResume()
}

// RemoteRun is a run whose conversation its product can continue.
type RemoteRun interface {
	// RemoteSession is the id of the run's conversation in its product.
	RemoteSession() string
}

// NotResumable returns the error a provider gives when its child's
// product cannot continue a conversation.
func NotResumable(provider, why string) error {
	return &Error{Code: CodeNotResumable, Provider: provider,
		Msg: fmt.Sprintf("provider %q cannot continue its child: %s; start a new child instead", provider, why)}
}
