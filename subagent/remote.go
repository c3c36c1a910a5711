package subagent

import (
	"context"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// resumeRemote continues an out-of-process child from its descriptor.
func (s *Service) resumeRemote(ctx context.Context, caller *agent.Agent, h session.Header, desc Descriptor, m content.Message) (string, error) {
	return "", errorf(CodeNotResumable, "child %s runs out of process (provider %s), which cannot continue it", h.ID, desc.Provider)
}
