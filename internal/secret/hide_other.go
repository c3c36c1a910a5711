//go:build !linux

package secret

// hide does nothing here: the variables leave os.Environ, so no child
// inherits them, but the initial environment block keeps them (macOS lets
// processes of the same user read it).
func hide([]string) error { return nil }
