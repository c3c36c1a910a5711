//go:build !temporal

package main

// tagged reports whether this build has the temporal kind (the tag temporal).
const tagged = false
