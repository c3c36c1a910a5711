//go:build temporal

package config

import (
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/temporal"
)

// temporalKinds is the temporal kind. It is in builds with the tag
// temporal only: the Temporal SDK (gRPC, protobuf, the Temporal API)
// triples the binary and its start-up work, which every dsh process (each
// `dsh acp` child among them) would otherwise pay.
func temporalKinds() []Kind {
	return []Kind{
		{Name: temporal.Kind, Block: "temporal", NewBlock: func() any { return new(temporal.Config) },
			Check: func(name string, block any) error {
				c := blockOf[temporal.Config](block)
				c.Name = name
				return c.Check()
			},
			New: func(env BuildEnv, name string, block any) (subagent.Provider, error) {
				c := blockOf[temporal.Config](block)
				c.Name, c.Getenv, c.Log, c.Sessions = name, env.Getenv, env.Runtime.Log, env.Runtime.Sessions
				return temporal.New(c)
			},
			Credentials: func(block any) []string {
				if key := blockOf[temporal.Config](block).APIKeyEnv; key != "" {
					return []string{key}
				}
				return nil
			}},
	}
}

// missingKind says how to get a kind this build leaves out: none.
func missingKind(string) string { return "" }
