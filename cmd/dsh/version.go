package main

import (
	"cmp"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// Release builds (scripts/release.sh) stamp these with -ldflags -X
// main.stampVersion=… and so on; other builds leave them empty and the
// build information the go command embeds is used instead. The linker is
// their only writer.
var (
	stampVersion  string // module version, e.g. v1.2.0
	stampCommit   string // full VCS revision
	stampDate     string // commit time, RFC 3339 in UTC
	stampModified string // "true" when built from a tree with uncommitted changes
)

// version is this build's module version, which dsh acp reports to its
// clients in agentInfo; --version prints it first.
var version = currentVersion().Version

// buildVersion is what a dsh binary knows about its own build.
type buildVersion struct {
	// Version is the module version: a release tag, a pseudo-version
	// (v0.0.0-20261130070106-83e2ed177f3d), or "(devel)" when unknown.
	Version string
	// Commit is the VCS revision; Date its commit time. Empty when unknown.
	Commit, Date string
	// Modified reports uncommitted changes in the tree the binary was built from.
	Modified bool
	// Go is the toolchain that built the binary.
	Go string
}

// currentVersion reads this binary's version: the linker's stamps first,
// then the embedded build information.
func currentVersion() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info, buildVersion{Version: stampVersion, Commit: stampCommit, Date: stampDate,
		Modified: stampModified == "true"})
}

// versionOf combines the build information (nil when there is none) with
// stamped values; a stamped commit also decides Modified.
func versionOf(info *debug.BuildInfo, stamped buildVersion) buildVersion {
	var v buildVersion
	if info != nil {
		v.Version, v.Go = info.Main.Version, info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.Date = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if stamped.Commit != "" {
		v.Commit, v.Modified = stamped.Commit, stamped.Modified
	}
	v.Version = cmp.Or(stamped.Version, v.Version, "(devel)")
	v.Date = cmp.Or(stamped.Date, v.Date)
	v.Go = cmp.Or(v.Go, runtime.Version())
	if v.Commit != "" || !strings.HasPrefix(v.Version, "v") {
		return v // the common case: no pseudo-version to read (and no regexp to compile)
	}
	if m := pseudoVersion().FindStringSubmatch(v.Version); m != nil {
		// go install …@latest of an untagged commit: no VCS settings, but
		// the pseudo-version names the commit and its time.
		v.Commit = m[2]
		if t, err := time.Parse("20060102150405", m[1]); err == nil {
			v.Date = cmp.Or(v.Date, t.Format(time.RFC3339))
		}
	}
	return v
}

// pseudoVersion matches a Go pseudo-version (go.dev/ref/mod#pseudo-versions),
// capturing its UTC commit time and its 12-digit commit prefix.
var pseudoVersion = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^v[0-9]+\.(?:0\.0-|[0-9]+\.[0-9]+-(?:[^+]*\.)?0\.)([0-9]{14})-([0-9a-f]{12})(?:\+[0-9A-Za-z.-]+)?$`)
})

// String is the text of dsh --version: the version on the first line, then
// one "key: value" line each for the commit, its date and the toolchain.
func (v buildVersion) String() string {
	commit := cmp.Or(v.Commit, "unknown")
	if v.Modified {
		commit += " (modified)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "dsh %s\n", v.Version)
	fmt.Fprintf(&b, "commit: %s\n", commit)
	fmt.Fprintf(&b, "date: %s\n", cmp.Or(v.Date, "unknown"))
	fmt.Fprintf(&b, "go: %s %s/%s\n", v.Go, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// addVersionFlag gives root a --version (-V) flag and a version command
// that print the build's version.
func addVersionFlag(root *cobra.Command) {
	root.Version = currentVersion().String()
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().BoolP("version", "V", false, "print dsh's version, commit, date and Go toolchain")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print dsh's version, commit, date and Go toolchain (as --version)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), root.Version)
			return err
		},
	})
}
