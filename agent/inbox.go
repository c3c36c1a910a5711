package agent

import (
	"slices"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Inbox targets.
const (
	nextTurn = "next-turn" // each item is one future turn's prompt
	nextStep = "next-step" // steering and injected context, all claimed at the next step
)

// item is a queued message: msg is the copy its inbox splice logged
// (immutable, as every logged payload), so that an item is 48 B, not 208.
type item struct {
	msg    *content.Message
	target string
	onEnd  func(session.TurnEnd) // called when the item's turn ends, or when it is dropped
	wake   bool                  // a next-step item that may run a step of its own (Steer); else it rides along (Inject)
}

// inbox holds pending messages; the agent's mutex guards it.
type inbox struct {
	turn []item
	step []item
}

func (b *inbox) push(it item) {
	if it.target == nextTurn {
		b.turn = append(b.turn, it)
	} else {
		b.step = append(b.step, it)
	}
}

// pending reports whether the inbox holds work of its own: a turn's
// prompt, or a next-step item that wakes. Injected items only ride along
// with a step that runs anyway.
func (b *inbox) pending() bool { return len(b.turn) > 0 || b.stepWakes() }

// stepWakes reports whether a next-step item may run a step of its own.
func (b *inbox) stepWakes() bool {
	return slices.ContainsFunc(b.step, func(it item) bool { return it.wake })
}

func (b *inbox) has(id string) bool {
	match := func(it item) bool { return it.msg.ID == id }
	return slices.ContainsFunc(b.turn, match) || slices.ContainsFunc(b.step, match)
}

// claimTurn takes what a new turn starts with: every next-step item and the
// first next-turn item.
func (b *inbox) claimTurn() (msgs []item) {
	msgs = b.claimStep()
	switch {
	case len(b.turn) == 0:
	case len(msgs) == 0: // the common case: take the item without copying it
		msgs, b.turn = b.turn[:1:1], b.turn[1:]
	default:
		msgs = append(msgs, b.turn[0])
		b.turn = b.turn[1:]
	}
	if len(b.turn) == 0 {
		b.turn = nil
	}
	return msgs
}

// claimStep takes every next-step item.
func (b *inbox) claimStep() []item {
	msgs := b.step
	b.step = nil
	return msgs
}

func (b *inbox) remove(id string) (item, bool) {
	for _, list := range []*[]item{&b.turn, &b.step} {
		if i := slices.IndexFunc(*list, func(it item) bool { return it.msg.ID == id }); i >= 0 {
			it := (*list)[i]
			*list = slices.Delete(*list, i, i+1)
			return it, true
		}
	}
	return item{}, false
}

func (b *inbox) clear() []item {
	out := append(b.step, b.turn...)
	b.step, b.turn = nil, nil
	return out
}
