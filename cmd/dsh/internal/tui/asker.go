package tui

import (
	"context"
	"errors"

	"github.com/dsh-go/dsh/permission"
)

// ask is one permission request waiting for the person at the terminal.
type ask struct {
	req   permission.Request
	reply chan permission.Answer // buffered: the UI never waits on it
	diff  string                 // the change an edit_file or write_file call would make (sanitized), set by the UI
}

// askGone withdraws an ask whose call no longer waits (its turn was
// cancelled).
type askGone struct{ ask *ask }

// errUIClosed refuses the asks that come after the terminal session ended.
var errUIClosed = errors.New("the terminal session has ended, so nobody can approve it")

// asker hands the delegation tree's asks to the UI and waits for the
// person's answer, or for the call's context to end.
type asker struct {
	feed *feed
	done <-chan struct{} // closed once the UI has stopped
}

// Ask implements permission.Asker.
func (k *asker) Ask(ctx context.Context, req permission.Request) (permission.Answer, error) {
	a := &ask{req: req, reply: make(chan permission.Answer, 1)}
	if !k.feed.push(a, false) {
		return permission.Reject, errUIClosed
	}
	select {
	case ans := <-a.reply:
		return ans, nil
	case <-ctx.Done():
		k.feed.push(askGone{a}, false)
		return permission.Reject, context.Cause(ctx)
	case <-k.done:
		return permission.Reject, errUIClosed
	}
}
