// Package earlyterm keeps a terminal from swallowing what is typed while
// dsh starts. Bubble Tea v1 asks the terminal for its background colour in
// a package init (through termenv): it puts the terminal in raw mode and
// reads it, discarding every key typed, until an answer comes or for 5
// seconds on a terminal that does not answer. termenv skips the query when
// $TERM names a dumb terminal, so this package, which Go initialises before
// termenv (ready packages are initialised in import-path order, and it
// imports the standard library only), hides $TERM for the inits; Restore,
// the first thing main does, gives it back before anything reads it.
package earlyterm

import "os"

// saved is $TERM as the process got it; written once, by init.
var saved = hide()

// hide sets $TERM to "dumb" and returns what it was, and whether it was
// set.
func hide() *string {
	v, ok := os.LookupEnv("TERM")
	if !ok {
		return nil
	}
	os.Setenv("TERM", "dumb")
	return &v
}

// Restore gives $TERM back as the process got it.
func Restore() {
	if saved != nil {
		os.Setenv("TERM", *saved)
	}
}
