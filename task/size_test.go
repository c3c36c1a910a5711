package task

import (
	"context"
	"testing"
	"time"
	"unsafe"
)

// Every task keeps a record while it lives: its flag sits in the Once's
// padding, so that it fits the allocator's 256-byte class, not the
// 288-byte one.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n > 256 {
		t.Errorf("a task record is %d bytes, want at most 256", n)
	}
}

// A running task nobody waits for (a parked background child's) holds no
// done channel; the first waiter makes it, closed at once if the task has
// settled, and a waiter before the end is woken by it.
func TestDoneChannelIsMadeForAWaiter(t *testing.T) {
	r := New(nil, nil, 0)
	var finish func(Outcome)
	id, err := r.Start(Spec{Kind: "k", Label: "l", Run: func(_ context.Context, done func(Outcome)) { finish = done }})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	rec := r.tasks[id]
	made := rec.done != nil
	r.mu.Unlock()
	if made {
		t.Fatal("a running task nobody waits for made its done channel")
	}
	woke := make(chan Snapshot, 1)
	go func() {
		snap, _ := r.Wait(context.Background(), id, nil, time.Minute)
		woke <- snap
	}()
	for {
		r.mu.Lock()
		made = rec.done != nil
		r.mu.Unlock()
		if made {
			break
		}
		time.Sleep(time.Millisecond)
	}
	finish(Outcome{Status: Completed, Output: "ok"})
	if snap := <-woke; snap.Status != Completed {
		t.Fatalf("the waiter saw %s, want completed", snap.Status)
	}
	id2, err := r.Start(Spec{Kind: "k", Label: "l", Run: func(_ context.Context, done func(Outcome)) { done(Outcome{Status: Completed}) }})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := r.Wait(context.Background(), id2, nil, time.Minute); err != nil || snap.Status != Completed {
		t.Fatalf("a wait after the end: %v, %v", snap.Status, err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
