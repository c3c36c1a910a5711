package mcpserver

import (
	"net/http"

	"github.com/dsh-go/dsh/internal/bearer"
)

// RequireToken serves next only the requests whose Authorization header
// is "Bearer " followed by token (compared in constant time); any other
// gets 401 before next sees it.
func RequireToken(token string, next http.Handler) http.Handler {
	return bearer.Require(token, "dsh mcp",
		"dsh mcp: this server needs the header \"Authorization: Bearer <token>\" with the token `dsh mcp` printed (kept in its token file)", next)
}
