package continuable_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// hangAll makes every model request of w hang until its turn is cancelled.
func hangAll(w *world, hung chan<- string) {
	w.setReply(func(req *llm.Request, last string) scripted.Entry {
		hung <- last
		return scripted.Hang("…")
	})
}

// A user interrupt of a tree stops every continuable child below the root,
// with cause user and no live parent needed, and their notices queue for
// the root's next turn instead of opening one.
func TestInterruptTreeStopsEveryDescendantWithoutWakingTheRoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		hung := make(chan string, 8)
		hangAll(w, hung)
		root := w.newParent("")
		a := w.start(root, "spawn", "a", subagent.ContinuableOptions{})
		b := w.start(root, "spawn", "b", subagent.ContinuableOptions{})
		<-hung
		<-hung
		child, _ := w.agents.Get(a.ChildID)
		g := w.start(child, "spawn", "g", subagent.ContinuableOptions{})
		<-hung
		other := w.newParent("")
		o := w.start(other, "spawn", "o", subagent.ContinuableOptions{})
		<-hung

		got := w.svc.InterruptTree(root.ID(), "Esc")
		if len(got) != 3 {
			t.Errorf("interrupted %v, want %s, %s and %s", got, a.ChildID, b.ChildID, g.ChildID)
		}
		ends := w.settled(3)
		for _, e := range ends {
			if e.ChildID == o.ChildID {
				t.Errorf("a child of another root was stopped")
			}
			if e.StopReason != subagent.Aborted {
				t.Errorf("%s ended %s", e.ChildID, e.StopReason)
			}
		}
		if root.Status() != agent.StatusIdle || root.Session().LastTurn() != 0 {
			t.Fatal("a notice of an interrupted child opened a root turn")
		}
		if w.svc.Working(root.ID()) || w.svc.Residency(a.ChildID) != subagent.NotResident {
			t.Error("something below the root still works")
		}
		if root.Queued() != 2 {
			t.Errorf("the root holds %d queued notices, want 2 (one per direct child)", root.Queued())
		}
		for _, id := range []string{a.ChildID, g.ChildID} {
			_, events, err := w.store.Read(id)
			if err != nil {
				t.Fatal(err)
			}
			var cause *session.Cause
			for _, e := range events {
				if d, ok := e.Data.(session.TurnEnd); ok {
					cause = d.Reason.Cause
				}
			}
			if cause == nil || cause.Kind != agent.CauseUser {
				t.Errorf("%s's turn ended with cause %+v, want user", id, cause)
			}
		}
		// The user's next prompt shows the notices to the model.
		w.setReply(func(req *llm.Request, last string) scripted.Entry { return scripted.Text("ok") })
		if _, err := root.Run(context.Background(), content.UserText("next")); err != nil {
			t.Fatal(err)
		}
		if n := len(notices(root, subagent.FormSettled)); n != 2 {
			t.Errorf("the root's next turn read %d settlement notices, want 2", n)
		}
		w.svc.InterruptTree(other.ID(), "")
		w.settled(4)
	})
}

// InterruptChildren stops the named children and what is below them only.
func TestInterruptChildrenStopsTheNamedAndBelow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		hung := make(chan string, 8)
		hangAll(w, hung)
		root := w.newParent("")
		a := w.start(root, "spawn", "a", subagent.ContinuableOptions{})
		b := w.start(root, "spawn", "b", subagent.ContinuableOptions{})
		<-hung
		<-hung
		child, _ := w.agents.Get(a.ChildID)
		w.start(child, "spawn", "g", subagent.ContinuableOptions{})
		<-hung
		if got := w.svc.InterruptChildren([]string{a.ChildID}, "/kill"); len(got) != 2 {
			t.Errorf("interrupted %v, want %s and its child", got, a.ChildID)
		}
		w.settled(2)
		if w.svc.Residency(b.ChildID) != subagent.ResidentRunning {
			t.Error("a sibling was stopped")
		}
		if root.Session().LastTurn() != 0 {
			t.Error("a killed child's notice opened a root turn")
		}
		w.svc.InterruptChildren([]string{b.ChildID}, "")
		w.settled(3)
	})
}

// DrainTree and DrainChildren tear down one root's children, or the named
// ones, and leave the rest running with admission open.
func TestDrainTreeAndChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		hung := make(chan string, 8)
		hangAll(w, hung)
		root := w.newParent("")
		a := w.start(root, "spawn", "a", subagent.ContinuableOptions{})
		<-hung
		child, _ := w.agents.Get(a.ChildID)
		w.start(child, "spawn", "g", subagent.ContinuableOptions{})
		<-hung
		other := w.newParent("")
		o := w.start(other, "spawn", "o", subagent.ContinuableOptions{})
		p := w.start(other, "spawn", "p", subagent.ContinuableOptions{})
		<-hung
		<-hung
		if err := w.svc.DrainTree(context.Background(), root.ID()); err != nil {
			t.Fatal(err)
		}
		if w.svc.Working(root.ID()) || w.svc.Residency(a.ChildID) != subagent.NotResident || root.Session().LastTurn() != 0 {
			t.Error("the drained tree still works, or woke its root")
		}
		if err := w.svc.DrainChildren(context.Background(), []string{o.ChildID}); err != nil {
			t.Fatal(err)
		}
		if w.svc.Residency(o.ChildID) != subagent.NotResident || w.svc.Residency(p.ChildID) != subagent.ResidentRunning {
			t.Error("DrainChildren did not stop exactly the named child")
		}
		w.start(root, "spawn", "again", subagent.ContinuableOptions{}) // admission stays open
		<-hung
	})
}

// interrupt_agent's authority covers every row list_agents shows under
// scope descendants: a continuable grandchild under a one-shot child.
func TestInterruptReachesAContinuableChildOfAOneShotChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		hung := make(chan string, 8)
		hangAll(w, hung)
		root := w.newParent("")
		oneShot, err := w.agents.Create(context.Background(), agent.CreateOptions{Cwd: w.dir, Owner: root,
			ParentSession: root.ID(), Origin: session.OriginSubagent, DelegationDepth: 1, Options: agent.Options{Provider: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		g := w.start(oneShot, "spawn", "g", subagent.ContinuableOptions{})
		<-hung
		rows, err := w.svc.ListDescendants(context.Background(), root.ID())
		if err != nil {
			t.Fatal(err)
		}
		seen := false
		for _, r := range rows {
			seen = seen || r.ID == g.ChildID
		}
		if !seen {
			t.Fatalf("list_agents scope descendants does not show the grandchild: %+v", rows)
		}
		if err := w.svc.Interrupt(root, g.ChildID); err != nil {
			t.Fatalf("the root interrupting its grandchild under a one-shot child: %v", err)
		}
		ends := w.settled(1)
		if ends[0].StopReason != subagent.Aborted {
			t.Errorf("the grandchild ended %s", ends[0].StopReason)
		}
		stranger := w.newParent("")
		if err := w.svc.Interrupt(stranger, g.ChildID); err != nil {
			t.Errorf("a settled target is a no-op: %v", err)
		}
	})
}

// An out-of-process child is interrupted by the id list_agents shows for
// the session its process writes (its conversation), as by its own, and
// a tree interrupt stops its run without waking the root.
func TestInterruptReachesAnOutOfProcessChildByItsConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		again := newProduct("again", true)
		if _, err := w.svc.Register(again); err != nil {
			t.Fatal(err)
		}
		root := w.newParent("")
		acc := w.start(root, "again", "hang", subagent.ContinuableOptions{})
		<-again.hang
		if err := w.svc.Interrupt(root, "conv-1"); err != nil {
			t.Fatal(err)
		}
		if ends := w.settled(1); ends[0].StopReason != subagent.Aborted {
			t.Fatalf("the child interrupted by its conversation ended %s", ends[0].StopReason)
		}
		w.idle(root) // its notice woke the root: interrupt_agent is the parent's
		turns := root.Session().LastTurn()
		w.followup(root, acc.ChildID, "hang")
		<-again.hang
		if got := w.svc.InterruptTree(root.ID(), "Esc"); len(got) != 1 || got[0] != acc.ChildID {
			t.Fatalf("InterruptTree = %v", got)
		}
		w.settled(2)
		if root.Session().LastTurn() != turns || root.Status() != agent.StatusIdle {
			t.Error("the interrupted out-of-process child's notice woke the root")
		}
		again.mu.Lock()
		live := again.live
		again.mu.Unlock()
		if live != 0 {
			t.Errorf("%d runs left", live)
		}
	})
}
