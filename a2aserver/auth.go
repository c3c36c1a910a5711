package a2aserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// RequireToken serves next only the requests whose Authorization header
// is "Bearer " followed by token (compared in constant time); any other
// gets 401 before next sees it.
func RequireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh a2a"`)
			http.Error(w, "dsh a2a: this server needs the header \"Authorization: Bearer <token>\" with the token of its token file ($DSH_HOME/a2a-token unless --token-file)",
				http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
