package earlyterm

import (
	"os"
	"testing"
)

// The package's init hid $TERM; Restore gives it back.
func TestRestore(t *testing.T) {
	if saved == nil {
		t.Skip("the test runs without $TERM")
	}
	if got := os.Getenv("TERM"); got != "dumb" {
		t.Fatalf("TERM during the inits is %q, want dumb", got)
	}
	Restore()
	if got := os.Getenv("TERM"); got != *saved {
		t.Fatalf("TERM is %q after Restore, want %q", got, *saved)
	}
}
