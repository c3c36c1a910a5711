package acpserver

import (
	"context"
	"errors"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/jsonrpcframe"
)

// DefaultDrainTimeout is how long the server goes on answering the
// client's pending requests after its input ended, before it cancels the
// turns still running (see Options.DrainTimeout).
const DefaultDrainTimeout = 10 * time.Second

// errInputClosed is the cause of the server's input context once the
// client's input has ended: nothing the server asks can be answered then.
var errInputClosed = errors.New("the client's input closed")

// drain runs once the client's input has ended cleanly: what the server
// would ask the client fails at once, the pending requests are answered
// (prompts finish their turns) for at most DrainTimeout, then the turns
// still running are cancelled, and their prompts answered cancelled.
func (s *server) drain(ctx context.Context, f *jsonrpcframe.Pending) {
	s.closeInput(errInputClosed)
	wait, cancel := context.WithTimeout(ctx, s.opts.DrainTimeout)
	defer cancel()
	if f.Wait(wait) || ctx.Err() != nil {
		return
	}
	s.opts.Log.Warn("acp: the client's input ended with requests pending; cancelling the running turns", "after", s.opts.DrainTimeout)
	s.mu.Lock()
	var sessions []*acpSession
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		s.Cancel(context.Background(), acpCancel(ss))
	}
	last, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	f.Wait(last)
}

func acpCancel(ss *acpSession) acpsdk.CancelNotification {
	return acpsdk.CancelNotification{SessionId: ss.id}
}
