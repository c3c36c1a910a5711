// Package layers holds no code: its test checks that dsh's packages import
// only downward where an import once pointed up (see layers_test.go).
package layers
