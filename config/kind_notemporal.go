//go:build !temporal

package config

// temporalKinds is empty: this build has no temporal kind (see
// kind_temporal.go; build with -tags temporal for it).
func temporalKinds() []Kind { return nil }

// missingKind says how to get a kind this build leaves out.
func missingKind(kind string) string {
	if kind == "temporal" {
		return "; the temporal kind is in dsh builds with the tag temporal: go install -tags temporal github.com/dsh-go/dsh/cmd/dsh@latest"
	}
	return ""
}
