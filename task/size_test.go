package task

import (
	"testing"
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
