package pattern

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for _, name := range []string{
		"OPENAI_API_KEY", "GITHUB_TOKEN", "my_password", "DB_PASSWD", "GPG_PASSPHRASE", "AWS_SECRET_ACCESS_KEY",
		"GOOGLE_APPLICATION_CREDENTIALS", "SSH_PRIVATE", "PRIVATE_REPO_URL", "GH_PAT", "NPM_AUTH", "auth_header", "SSH_AUTH_SOCK",
		"BW_SESSION", "OP_SESSION_myteam", "SESSION_COOKIE", "bw_session", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "otel_exporter_otlp_logs_headers",
	} {
		if !Name(name) {
			t.Errorf("Name(%q) = false, want true", name)
		}
	}
	for _, name := range []string{
		"PATH", "HOME", "PWD", "OLDPWD", "LANG", "XDG_SESSION_ID", "DBUS_SESSION_BUS_ADDRESS", "DESKTOP_SESSION",
		"SESSION_MANAGER", "XAUTHORITY", "PATCH", "GOPRIVATE", "OTEL_EXPORTER_OTLP_ENDPOINT", "GIT_ASKPASS", "AUTHOR",
	} {
		if Name(name) {
			t.Errorf("Name(%q) = true, want false", name)
		}
	}
}

// The credentials each format finds, and the ordinary text it leaves.
func TestFind(t *testing.T) {
	const (
		ghp   = "ghp_0123456789abcdefABCDEF0123456789abcd"
		pat   = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123"
		glpat = "glpat-abcdefghij0123456789"
		slack = "xoxb-123456789012-abcdefABCDEF"
		aws   = "AKIAIOSFODNN7EXAMPLE"
		sk    = "sk-proj-abc123DEF456ghi789JKLmno012PQR345stu678"
		ds    = "sk-0123456789abcdef0123456789abcdef"
		npm   = "npm_abcdefghijklmnopqrstuvwxyz0123456789"
		gkey  = "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234"
		jwt   = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
		hf    = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
		pem   = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
	)
	for _, tc := range []struct {
		text string
		want []string // the credentials found, in order
	}{
		{"DATABASE_URL=postgres://app:SENTINEL-pw@db/x", []string{"SENTINEL-pw"}},
		{"https://x-access-token:" + ghp + "@github.com/o/r.git", []string{ghp}},
		{"token " + ghp + ", pat " + pat + ".", []string{ghp, pat}},
		{glpat + " " + slack + " " + aws + " " + npm, []string{glpat, slack, aws, npm}},
		{"export OPENAI_API_KEY=" + sk + "\nDEEPSEEK=" + ds, []string{sk, ds}},
		{`{"key":"` + gkey + `"}`, []string{gkey}},
		{"Authorization: Bearer abcdef0123456789xyz", []string{"abcdef0123456789xyz"}},
		{"cookie=" + jwt + ";", []string{jwt}},
		{hf, []string{hf}},
		{"key:\n" + pem + "\nafter", []string{pem}},
		{"cut: -----BEGIN RSA PRIVATE KEY-----\nMIIEow", []string{"-----BEGIN RSA PRIVATE KEY-----\nMIIEow"}},
		{"sk_live_0123456789abcdefXYZ", []string{"sk_live_0123456789abcdefXYZ"}},

		// Ordinary text.
		{"https://example.com/a:b@c", nil},           // the @ is in the path
		{"ssh://git@github.com/o/r", nil},            // a user, no password
		{"http://localhost:8080/x", nil},             // a port
		{"risk-assessment-framework-2024-v1", nil},   // sk- inside a word
		{"sk-some-long-hyphenated-branch-name", nil}, // no digit
		{"PATH=/usr/bin:/opt/sk-toolkit-2024-linux-x64-release-candidate/bin", nil},
		{"sk-0123456789abcdef0123", nil}, // too short for a key
		{"AKIAIOSFODNN7EXAMPLEXX", nil},  // too long for an access key id
		{"ghp_short", nil},
		{"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", nil},
		{"Bearer token", nil},
		{"eyJhbGci only", nil},
	} {
		var got []string
		for _, sp := range Find(tc.text) {
			got = append(got, tc.text[sp.Start:sp.End])
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("Find(%q) = %q, want %q", tc.text, got, tc.want)
		}
		if Value(tc.text) != (len(tc.want) > 0) {
			t.Errorf("Value(%q) = %v", tc.text, !Value(tc.text))
		}
	}
}

func TestReplace(t *testing.T) {
	in := "a postgres://u:pw@h/db b ghp_0123456789abcdefABCDEF0123456789abcd c"
	if got, want := Replace(in, "[X]"), "a postgres://u:[X]@h/db b [X] c"; got != want {
		t.Fatalf("Replace = %q, want %q", got, want)
	}
	if got := Replace("nothing here", "[X]"); got != "nothing here" {
		t.Fatalf("Replace changed ordinary text: %q", got)
	}
}

// Overlapping finds merge into one span.
func TestFindMergesOverlaps(t *testing.T) {
	text := "https://u:sk-abc123DEF456ghi789JKLmno012PQR345stu678@h"
	spans := Find(text)
	if len(spans) != 1 || text[spans[0].Start:spans[0].End] != "sk-abc123DEF456ghi789JKLmno012PQR345stu678" {
		t.Fatalf("Find = %v", spans)
	}
}

func FuzzFind(f *testing.F) {
	f.Add("postgres://app:pw@db/x ghp_0123456789abcdefABCDEF0123456789abcd")
	f.Add("-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----")
	f.Add("eyJa.eyJb.c Bearer 0123456789abcdef sk-0123456789abcdef0123")
	f.Fuzz(func(t *testing.T, text string) {
		spans := Find(text)
		end := -1
		for _, sp := range spans {
			if sp.Start <= end || sp.End <= sp.Start || sp.End > len(text) {
				t.Fatalf("bad spans %v in %q", spans, text)
			}
			end = sp.End
		}
		out := Replace(text, "\x00")
		if len(Find(out)) > 0 && !strings.Contains(text, "\x00") {
			// A replacement can join two halves into a new find only
			// across the marker, which no format accepts.
			t.Fatalf("Replace(%q) = %q still holds %v", text, out, Find(out))
		}
	})
}
