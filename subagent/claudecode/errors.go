package claudecode

import (
	"github.com/dsh-go/dsh/subagent"
)

// ConfigError is a Config that New rejects.
type ConfigError = subagent.ConfigError
