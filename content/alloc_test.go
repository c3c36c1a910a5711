//go:build !race

// Under -race, crypto/rand's buffer escapes.

package content_test

import (
	"testing"

	"github.com/dsh-go/dsh/content"
)

// NewID costs one allocation, its string (uuid.NewString: two).
func TestNewIDAllocatesOnce(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = content.NewID() }); n != 1 {
		t.Errorf("NewID: %v allocations, want 1", n)
	}
}
