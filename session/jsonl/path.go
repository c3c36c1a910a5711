package jsonl

import (
	"strconv"
	"strings"
	"unicode/utf16"
)

// Ext ends the name of a session's file: <encoded-id>.jsonl in its project
// directory.
const Ext = ".jsonl"

// FileName is the name of a session's file inside a directory of its own,
// the layout of earlier builds (<project-key>/<encoded-id>/session.jsonl),
// still read.
const FileName = "session.jsonl"

// maxSlug bounds a project slug so that "--<slug>--" fits NAME_MAX (255).
const maxSlug = 251

// ProjectKey returns the directory name grouping the sessions of cwd: runs of
// '/', '\' and ':' become one '-', other characters outside [A-Za-z0-9._-]
// are escaped as ~XXXX (UTF-16 code units), leading dashes are dropped
// ("root" if nothing is left), the slug is cut to 251 bytes and wrapped as
// "--<slug>--". An empty cwd gives "_no-cwd".
func ProjectKey(cwd string) string {
	if cwd == "" {
		return "_no-cwd"
	}
	var sb strings.Builder
	inSep := false
	for _, r := range cwd {
		if r == '/' || r == '\\' || r == ':' {
			if !inSep {
				sb.WriteByte('-')
			}
			inSep = true
			continue
		}
		inSep = false
		writeEscaped(&sb, r)
	}
	slug := strings.TrimLeft(sb.String(), "-")
	if slug == "" {
		slug = "root"
	}
	if len(slug) > maxSlug {
		slug = slug[:maxSlug]
	}
	return "--" + slug + "--"
}

// EncodeID returns the directory name of session id: characters outside
// [A-Za-z0-9._-] are escaped as ~XXXX (UTF-16 code units), and the ids "."
// and ".." are escaped whole.
func EncodeID(id string) string {
	switch id {
	case ".":
		return "~002E"
	case "..":
		return "~002E~002E"
	}
	if plainID(id) {
		return id
	}
	var sb strings.Builder
	sb.Grow(len(id))
	for _, r := range id {
		writeEscaped(&sb, r)
	}
	return sb.String()
}

// plainID reports whether id holds only characters EncodeID keeps.
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

func writeEscaped(sb *strings.Builder, r rune) {
	switch {
	case 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
		sb.WriteRune(r)
	case r >= 0x10000:
		hi, lo := utf16.EncodeRune(r)
		writeUnit(sb, hi)
		writeUnit(sb, lo)
	default:
		writeUnit(sb, r)
	}
}

func writeUnit(sb *strings.Builder, u rune) {
	const hex = "0123456789ABCDEF"
	sb.WriteByte('~')
	for shift := 12; shift >= 0; shift -= 4 {
		sb.WriteByte(hex[u>>shift&0xF])
	}
}

// DecodeID reverses EncodeID; ok is false for a name EncodeID cannot have
// produced.
func DecodeID(name string) (id string, ok bool) {
	var units []uint16
	for i := 0; i < len(name); {
		c := name[i]
		if c != '~' {
			units = append(units, uint16(c))
			i++
			continue
		}
		if i+5 > len(name) {
			return "", false
		}
		u, err := strconv.ParseUint(name[i+1:i+5], 16, 16)
		if err != nil {
			return "", false
		}
		units = append(units, uint16(u))
		i += 5
	}
	id = string(utf16.Decode(units))
	return id, EncodeID(id) == name
}
