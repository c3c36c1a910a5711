package a2aserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dsh-go/dsh/a2aserver"
)

func TestRequireToken(t *testing.T) {
	h := a2aserver.RequireToken("tok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for header, want := range map[string]int{"": 401, "Bearer": 401, "Bearer tok2": 401, "Basic tok": 401, "Bearer tok": 418, "bearer  tok ": 418} {
		r := httptest.NewRequest(http.MethodPost, "/a2a", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: %d, want %d", header, w.Code, want)
		}
	}
}
