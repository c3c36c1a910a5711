package config_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/config"
)

func TestACPSettings(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte("acp:\n  permissionTimeout: 30s\n  maxSessions: 4\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ACP.PermissionTimeout != 30*time.Second || cfg.ACP.MaxSessions != 4 || cfg.ACP.AskPermission != nil {
		t.Fatalf("acp %+v", cfg.ACP)
	}
	_, err = config.Parse("dsh.yaml", []byte("acp:\n  maxSessions: -1\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "maxSessions must not be negative") {
		t.Fatalf("negative maxSessions: %v", err)
	}
}

// The configuration example of the README parses.
func TestReadmeConfigExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no yaml block")
	}
	cfg, err := config.Parse("README.md", m[1], env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ACP.PermissionTimeout != 5*time.Minute || cfg.ACP.MaxSessions != 32 {
		t.Fatalf("acp %+v", cfg.ACP)
	}
}
