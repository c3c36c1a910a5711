// Command licenses checks the licences of the modules a Go module's
// packages use, offline, from the licence files in the module cache.
//
//	go run . [-platforms GOOS/GOARCH,...] [-notices FILE] MODULE_DIR [PATTERN ...]
//
// It lists the packages matching the patterns (default ./...) in the module
// at MODULE_DIR with their dependencies, with and without their tests, for
// each platform, and classifies every LICENSE, LICENCE or COPYING file of
// the modules they come from with github.com/google/licensecheck. Every
// module, the checked one included, must carry Apache-2.0, MIT,
// BSD-2-Clause, BSD-3-Clause or ISC; a module only tests use may also carry
// MPL-2.0. Otherwise the command names the module and the file and exits 1.
// -notices writes the licence texts of the non-test dependencies, for a
// release to ship next to its binaries.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// cli runs the command with args and returns its exit status.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("licenses", flag.ContinueOnError)
	fs.SetOutput(stderr)
	notices := fs.String("notices", "", "write the licence texts of the non-test dependencies to `file`")
	platforms := fs.String("platforms", "", "comma-separated GOOS/GOARCH `list` to list packages for (default: this machine's)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: licenses [-platforms GOOS/GOARCH,...] [-notices FILE] MODULE_DIR [PATTERN ...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return 2
	}
	patterns := fs.Args()[1:]
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	var list []string
	if *platforms != "" {
		list = strings.Split(*platforms, ",")
	}
	if err := check(ctx, stdout, stderr, fs.Arg(0), patterns, list, *notices); err != nil {
		fmt.Fprintln(stderr, "licenses:", err)
		return 1
	}
	return 0
}

// check prints every module with its licences to stdout and every problem
// to stderr, and fails when there is one; then it writes the notices.
func check(ctx context.Context, stdout, stderr io.Writer, dir string, patterns, platforms []string, notices string) error {
	mods, err := Scan(ctx, dir, patterns, platforms)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	failed := 0
	for _, m := range mods {
		use := "built"
		if m.TestOnly {
			use = "tests"
		}
		licences := strings.Join(m.Licences(), ", ")
		if slices.ContainsFunc(m.Files, func(f File) bool { return f.Reviewed }) {
			licences += " (reviewed)"
		}
		if why := m.Accepted(); why != "" {
			licences = "none (accepted: " + why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Path, m.Version, use, licences)
		if problems := m.Problems(); len(problems) > 0 {
			failed++
			for _, p := range problems {
				fmt.Fprintf(stderr, "licenses: %s: %s\n", m, p)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d modules have an unknown or disallowed licence", failed, len(mods))
	}
	if notices == "" {
		return nil
	}
	f, err := os.Create(notices)
	if err != nil {
		return err
	}
	if err := WriteNotices(f, mods); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
