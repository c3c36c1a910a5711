package agentdef_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agentdef"
)

// aliasBomb is YAML of levels anchors, each nine aliases of the one
// before, every line indented by indent.
func aliasBomb(levels int, indent string) string {
	var b strings.Builder
	b.WriteString(indent + "a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "%sa%d: &a%d [%s]\n", indent, i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	return b.String()
}

// A definition whose front matter or schema file holds an alias bomb is
// refused in milliseconds, naming the file and the line; a six-level bomb
// in an inline outputSchema, or in the schema file it names, took about
// 20 s each before (aliases within one field were expanded).
func TestAliasBombIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "schema.yaml"), []byte(aliasBomb(6, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := agentdef.Options{Tools: []string{"bash", "read_file"}, Routes: []string{"r"}}
	for _, tc := range []struct{ name, doc, want string }{
		{"inline schema", "---\nname: x\ndescription: d\noutputSchema:\n" + aliasBomb(6, "  ") + "---\n",
			"f.md:9: YAML aliases expand to more than 10000 nodes"},
		{"schema file", "---\nname: x\ndescription: d\noutputSchema: schema.yaml\n---\n",
			"f.md:4: outputSchema: " + filepath.Join(dir, "schema.yaml") + ": line 5: YAML aliases expand to more than 10000 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := agentdef.Parse(agentdef.Source{Scope: "project", Path: filepath.Join(dir, "f.md")}, []byte(tc.doc), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want %q", err, tc.want)
			}
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Errorf("refused after %v", took)
			}
		})
	}
}
