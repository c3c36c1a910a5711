package config

import (
	"fmt"

	"github.com/goccy/go-yaml"

	"github.com/dsh-go/dsh/internal/secret"
)

// Hidden stands for a value Render does not show.
const Hidden = "(hidden)"

// Render returns the merged configuration as YAML, in dsh.yaml's keys
// (agent.route, not its old name), without the values a file may hold
// secrets in: an MCP server's env and headers values, and the secret
// parts of URLs (user-info, a key in the query) and the keys' values
// wherever they appear.
func (cfg Config) Render(getenv func(string) string) ([]byte, error) {
	raw, err := yaml.MarshalWithOptions(cfg, yaml.OmitEmpty())
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var doc yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(raw, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	for i, item := range doc {
		switch item.Key {
		case "agent":
			if agent, ok := item.Value.(yaml.MapSlice); ok {
				for j := range agent {
					if agent[j].Key == "provider" {
						agent[j].Key = "route"
					}
				}
			}
		case "mcpServers":
			servers, _ := item.Value.(yaml.MapSlice)
			for _, s := range servers {
				block, _ := s.Value.(yaml.MapSlice)
				for _, kv := range block {
					if kv.Key != "env" && kv.Key != "headers" {
						continue
					}
					vars, _ := kv.Value.(yaml.MapSlice)
					for k := range vars {
						vars[k].Value = Hidden
					}
				}
			}
		}
		doc[i] = item
	}
	out, err := yaml.MarshalWithOptions(doc, yaml.OmitEmpty())
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return []byte(secret.NewRedactor(cfg.Credentials(getenv)...).String(string(out))), nil
}
