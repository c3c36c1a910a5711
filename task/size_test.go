package task

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"
)

// Every task keeps a record while it lives: its flags sit in the Once's
// padding, and of its outcome it keeps the output (the status and detail
// are its snapshot's), so that it fits the allocator's 256-byte class with
// the context and the AfterFunc slot it holds, not the 288-byte one.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n > 256 {
		t.Errorf("a task record is %d bytes, want at most 256", n)
	}
}

// A task's context holds one AfterFunc function itself (a background
// child's abort), which runs in its own goroutine when the task is killed
// and not after its stop; the cause stays the kill's, and a function
// registered on a cancelled task runs at once.
func TestTaskContextHoldsAnAfterFunc(t *testing.T) {
	r := New(nil, nil, 0)
	type afterFuncer interface{ AfterFunc(func()) func() bool }
	ctxs := make(chan context.Context, 1)
	var finish func(Outcome)
	produce := func(ctx context.Context, done func(Outcome)) { finish = done; ctxs <- ctx }
	id, err := r.Start(Spec{Kind: "k", Label: "kept", Run: produce})
	if err != nil {
		t.Fatal(err)
	}
	ctx := <-ctxs
	c, ok := ctx.(afterFuncer)
	if !ok {
		t.Fatalf("a task's context (%T) has no AfterFunc method", ctx)
	}
	ran := make(chan struct{}, 3)
	stopped := c.AfterFunc(func() { ran <- struct{}{} })
	if !stopped() || stopped() {
		t.Fatal("stop of a pending function: want true once, then false")
	}
	c.AfterFunc(func() { ran <- struct{}{} })
	second := c.AfterFunc(func() { ran <- struct{}{} }) // the slot is taken: context.AfterFunc
	r.mu.Lock()
	rec := r.tasks[id]
	r.mu.Unlock()
	if rec.Done() == nil || ctx.Err() != nil {
		t.Fatal("a running task's context is done")
	}
	if _, _, err := r.Kill(id, nil, "enough"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("a kill did not run the functions registered on the task's context")
		}
	}
	if second() {
		t.Fatal("stop after the kill reported that it stopped the function")
	}
	var ke *KillError
	if !errors.As(context.Cause(ctx), &ke) || ke.Reason != "enough" {
		t.Fatalf("cause = %v, want the kill's", context.Cause(ctx))
	}
	if late := c.AfterFunc(func() { ran <- struct{}{} }); late() {
		t.Fatal("stop of a function registered after the kill reported that it stopped it")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a function registered on a killed task did not run")
	}
	select {
	case <-ran:
		t.Fatal("a stopped function ran")
	case <-time.After(50 * time.Millisecond):
	}
	finish(Outcome{Status: Killed})
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
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
