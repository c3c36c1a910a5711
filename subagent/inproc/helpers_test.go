package inproc_test

import (
	"runtime"
	"time"
)

// runtimeGosched yields while a test polls for a child's progress.
func runtimeGosched() {
	runtime.Gosched()
	time.Sleep(time.Millisecond)
}
