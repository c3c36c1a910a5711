package acpchild

import (
	"errors"
	"strconv"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/subagent"
)

// slots are the places under the parent tree's live-children cap that a
// dsh child holds for its own children (acpmeta.MethodAdmit): given back
// when it says so, and all of them when its process ends.
type slots struct {
	live *subagent.LiveSlots // nil: the tree has no cap, the child is not answered

	mu     sync.Mutex
	next   int
	held   map[string]func()
	closed bool // the process ended: no more places
}

// admit takes a place for the child's next child.
func (s *slots) admit() (acpmeta.Admitted, error) {
	if s.live == nil {
		return acpmeta.Admitted{}, acpsdk.NewMethodNotFound(acpmeta.MethodAdmit)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return acpmeta.Admitted{Refused: "the child has ended"}, nil
	}
	release, err := s.live.Acquire()
	if err != nil {
		return acpmeta.Admitted{Refused: refusal(err)}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // the process ended while the place was taken
		release()
		return acpmeta.Admitted{Refused: "the child has ended"}, nil
	}
	s.next++
	id := strconv.Itoa(s.next)
	if s.held == nil {
		s.held = map[string]func(){}
	}
	s.held[id] = release
	return acpmeta.Admitted{Slot: id}, nil
}

// refusal is the message of a refused place.
func refusal(err error) string {
	if se := (*subagent.Error)(nil); errors.As(err, &se) {
		return se.Msg
	}
	return err.Error()
}

// release gives back the place id.
func (s *slots) release(id string) {
	s.mu.Lock()
	release := s.held[id]
	delete(s.held, id)
	s.mu.Unlock()
	if release != nil {
		release()
	}
}

// close gives back every place, once the child's process has ended.
func (s *slots) close() {
	s.mu.Lock()
	held := s.held
	s.held, s.closed = nil, true
	s.mu.Unlock()
	for _, release := range held {
		release()
	}
}
