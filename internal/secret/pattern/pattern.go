// Package pattern recognises credentials dsh was not told about: by the
// name of the variable that holds one (Name), and by the shape of the value
// (Find). The environment of commands drops both (internal/proc), and
// redaction replaces what Find finds (internal/secret). It is best effort:
// a credential in an unknown format, or one the command transforms (rev,
// base64), is not recognised.
package pattern

import (
	"slices"
	"strings"
)

// Name reports whether an environment variable's name says it holds a
// credential, in any letter case: it contains KEY, TOKEN, SECRET,
// PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL, COOKIE or AUTH_ (so
// SSH_AUTH_SOCK, the SSH agent, too); it has a part PRIVATE between
// underscores (GIT_PRIVATE_SSH, not GOPRIVATE); it ends in _PAT or _AUTH;
// it is a password manager's unlocked session (BW_SESSION, OP_SESSION_*);
// or it is
// OTEL_EXPORTER_OTLP_HEADERS or OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS (the
// tracing exporter's credentials). Other SESSION names (XDG_SESSION_ID,
// DESKTOP_SESSION, DBUS_SESSION_BUS_ADDRESS) are ordinary and kept.
func Name(name string) bool {
	upper := strings.ToUpper(name)
	for _, word := range [...]string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "COOKIE", "AUTH_"} {
		if strings.Contains(upper, word) {
			return true
		}
	}
	if slices.Contains(strings.Split(upper, "_"), "PRIVATE") {
		return true
	}
	if strings.HasSuffix(upper, "_PAT") || strings.HasSuffix(upper, "_AUTH") {
		return true
	}
	if upper == "BW_SESSION" || strings.HasPrefix(upper, "OP_SESSION_") {
		return true
	}
	if rest, ok := strings.CutPrefix(upper, "OTEL_EXPORTER_OTLP_"); ok && strings.HasSuffix(rest, "HEADERS") {
		return true
	}
	return false
}

// Value reports whether s holds a credential in a known format (see Find).
func Value(s string) bool { return len(Find(s)) > 0 }

// Span is the byte range [Start, End) of a credential in a text.
type Span struct{ Start, End int }

// Find returns where s holds credentials in a known format, in order and
// without overlap:
//
//   - the password of a URL's user-info (postgres://app:PASSWORD@db/x);
//   - GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab
//     (glpat-), Slack (xoxa-, xoxb-, xoxp-, xoxr-, xoxs-), npm (npm_),
//     Hugging Face (hf_) and Stripe (sk_live_, rk_live_, sk_test_,
//     rk_test_) tokens;
//   - AWS access key ids (AKIA…, ASIA…), Google API keys (AIza…);
//   - OpenAI, Anthropic and DeepSeek keys (sk- and 32 or more letters,
//     digits, - and _);
//   - JSON Web Tokens (three base64url parts, the first starting eyJ);
//   - the token after "Bearer ";
//   - PEM private key blocks (-----BEGIN … PRIVATE KEY----- to its END line,
//     or to the end of s when it is cut).
func Find(s string) []Span {
	var spans []Span
	for _, f := range formats {
		for from := 0; ; {
			i := strings.Index(s[from:], f.prefix)
			if i < 0 {
				break
			}
			i += from
			if sp, ok := f.match(s, i); ok {
				spans = append(spans, sp)
				from = max(sp.End, i+1)
			} else {
				from = i + 1
			}
		}
	}
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b Span) int { return a.Start - b.Start })
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.Start <= last.End {
			last.End = max(last.End, sp.End)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// Replace returns s with every credential Find finds replaced by marker.
func Replace(s, marker string) string {
	spans := Find(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for _, sp := range spans {
		b.WriteString(s[at:sp.Start])
		b.WriteString(marker)
		at = sp.End
	}
	b.WriteString(s[at:])
	return b.String()
}

// format is one credential shape: a literal prefix, found with
// strings.Index, and a check of what surrounds it.
type format struct {
	prefix string
	match  func(s string, at int) (Span, bool) // at: where prefix starts
}

var formats = func() []format {
	var fs []format
	token := func(prefix string, body func(byte) bool, minLen, maxLen int, mixed bool) {
		fs = append(fs, format{prefix, func(s string, at int) (Span, bool) {
			return tokenAt(s, at, prefix, body, minLen, maxLen, mixed)
		}})
	}
	for _, p := range [...]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"} {
		token(p, alnum, 30, 0, false)
	}
	token("github_pat_", word, 22, 0, false)
	token("glpat-", tokenChar, 20, 0, false)
	for _, p := range [...]string{"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"} {
		token(p, tokenChar, 10, 0, false)
	}
	token("npm_", alnum, 36, 0, false)
	token("hf_", alnum, 30, 0, true)
	for _, p := range [...]string{"sk_live_", "rk_live_", "sk_test_", "rk_test_"} {
		token(p, alnum, 16, 0, false)
	}
	token("AKIA", upperDigit, 16, 16, false)
	token("ASIA", upperDigit, 16, 16, false)
	token("AIza", tokenChar, 35, 0, false)
	fs = append(fs,
		format{"sk-", apiKeyAt},
		format{"eyJ", jwtAt},
		format{"Bearer ", bearerAt},
		format{"://", userInfoAt},
		format{"-----BEGIN ", pemAt},
	)
	return fs
}()

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
func upperDigit(c byte) bool { return 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
func word(c byte) bool       { return alnum(c) || c == '_' }
func tokenChar(c byte) bool  { return word(c) || c == '-' }

// run returns the end of the run of bytes from i that ok accepts.
func run(s string, i int, ok func(byte) bool) int {
	for i < len(s) && ok(s[i]) {
		i++
	}
	return i
}

// startsWord reports whether a token may start at i: it is not preceded by
// a letter, digit or underscore.
func startsWord(s string, i int) bool { return i == 0 || !word(s[i-1]) }

// tokenAt matches prefix at at followed by minLen to maxLen (0: any) body
// bytes, ending where the body's bytes end; mixed asks for a letter and a
// digit in the body.
func tokenAt(s string, at int, prefix string, body func(byte) bool, minLen, maxLen int, mixed bool) (Span, bool) {
	if !startsWord(s, at) {
		return Span{}, false
	}
	start := at + len(prefix)
	end := run(s, start, body)
	n := end - start
	if n < minLen || maxLen > 0 && n > maxLen {
		return Span{}, false
	}
	if mixed {
		var letter, digit bool
		for i := start; i < end; i++ {
			c := s[i]
			digit = digit || '0' <= c && c <= '9'
			letter = letter || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		}
		if !letter || !digit {
			return Span{}, false
		}
	}
	return Span{at, end}, true
}

// apiKeyAt matches an OpenAI, Anthropic or DeepSeek key: sk- and at least
// 32 bytes of letters, digits, - and _, with letters and digits and a run
// of 20 letters and digits (sk-proj-…, sk-ant-api03-…, sk-<32 hex>), so that
// a hyphenated name such as sk-toolkit-2024-linux-x64-release is not one.
func apiKeyAt(s string, at int) (Span, bool) {
	sp, ok := tokenAt(s, at, "sk-", tokenChar, 32, 0, true)
	if !ok {
		return Span{}, false
	}
	longest, n := 0, 0
	for i := sp.Start + len("sk-"); i < sp.End; i++ {
		if alnum(s[i]) {
			n++
			longest = max(longest, n)
		} else {
			n = 0
		}
	}
	return sp, longest >= 20
}

// jwtAt matches three base64url parts of at least 8 bytes each, joined by
// dots, the first starting at at with eyJ ("{" encoded).
func jwtAt(s string, at int) (Span, bool) {
	if !startsWord(s, at) {
		return Span{}, false
	}
	b64 := func(c byte) bool { return tokenChar(c) }
	i := at
	for part := range 3 {
		if part > 0 {
			if i >= len(s) || s[i] != '.' {
				return Span{}, false
			}
			i++
		}
		end := run(s, i, b64)
		if end-i < 8 {
			return Span{}, false
		}
		i = end
	}
	return Span{at, i}, true
}

// bearerAt matches the token of "Bearer TOKEN" (16 bytes or more).
func bearerAt(s string, at int) (Span, bool) {
	if !startsWord(s, at) {
		return Span{}, false
	}
	start := at + len("Bearer ")
	end := run(s, start, func(c byte) bool { return tokenChar(c) || strings.IndexByte("._~+/=", c) >= 0 })
	if end-start < 16 {
		return Span{}, false
	}
	return Span{start, end}, true
}

// userInfoAt matches the password of scheme://user:password@host, at being
// where "://" starts.
func userInfoAt(s string, at int) (Span, bool) {
	// A scheme: a letter, then letters, digits, +, - or . up to "://".
	i := at
	for i > 0 && (alnum(s[i-1]) || strings.IndexByte("+-.", s[i-1]) >= 0) {
		i--
	}
	if i == at || !('a' <= s[i]|0x20 && s[i]|0x20 <= 'z') {
		return Span{}, false
	}
	start := at + len("://")
	colon := -1
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == ':' && colon < 0:
			colon = j
		case c == '@':
			if colon < 0 || j == colon+1 {
				return Span{}, false
			}
			return Span{colon + 1, j}, true
		case c == '/' || c == '?' || c == '#' || c <= ' ' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '\\':
			return Span{}, false
		}
	}
	return Span{}, false
}

// pemAt matches a PEM private key block, to its END line or the end of s.
func pemAt(s string, at int) (Span, bool) {
	head := s[at+len("-----BEGIN "):]
	label, _, ok := strings.Cut(head[:min(len(head), 64)], "-----")
	if !ok || !strings.HasSuffix(label, "PRIVATE KEY") {
		return Span{}, false
	}
	endLine := "-----END " + label + "-----"
	if i := strings.Index(s[at:], endLine); i >= 0 {
		return Span{at, at + i + len(endLine)}, true
	}
	return Span{at, len(s)}, true
}
