package hook

import (
	"encoding/json"
	"fmt"
)

// ParseSettings reads the hooks of one of Claude Code's settings files
// (~/.claude/settings.json, a project's .claude/settings.json and
// .claude/settings.local.json), a JSON object whose other keys are
// ignored. disableAllHooks: true gives none. Pass the result to
// NewSettings, which leaves out what dsh does not run.
func ParseSettings(data []byte) (Config, error) {
	var file struct {
		Hooks           json.RawMessage `json:"hooks"`
		DisableAllHooks bool            `json:"disableAllHooks"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("not a JSON object of settings: %v", err)
	}
	if file.DisableAllHooks || len(file.Hooks) == 0 || string(file.Hooks) == "null" {
		return nil, nil
	}
	var cfg Config
	if err := json.Unmarshal(file.Hooks, &cfg); err != nil {
		return nil, fmt.Errorf("hooks: want {EVENT: [{matcher: …, hooks: [{type: command, command: …}]}]}: %v", err)
	}
	return cfg, nil
}
