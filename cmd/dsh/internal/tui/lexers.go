package tui

import (
	"regexp"
	"strings"

	"github.com/alecthomas/chroma/v2"
)

// The lexers of the languages a fence names, written for chroma's engine:
// enough to colour keywords, types, strings, numbers and comments, not to
// parse. Every rule matches at least one character and none scans ahead
// for a terminator it may not find (strings and comments are states,
// bounded look-aheads are short), so a lexer's time is linear in its input,
// whatever the input is.

// lexerName is the lexer for a fence's language, or "" for none.
func lexerName(lang string) string {
	switch strings.ToLower(lang) {
	case "go", "golang":
		return "go"
	case "python", "py", "python3", "py3":
		return "python"
	case "javascript", "js", "jsx", "mjs", "cjs", "node", "typescript", "ts", "tsx", "mts", "cts":
		return "javascript"
	case "sh", "bash", "shell", "zsh", "ksh":
		return "shell"
	case "json", "jsonc", "json5", "jsonl", "ndjson":
		return "json"
	case "yaml", "yml":
		return "yaml"
	case "diff", "patch", "udiff":
		return "diff"
	case "rust", "rs":
		return "rust"
	case "c", "h":
		return "c"
	case "cpp", "c++", "cc", "cxx", "hpp", "hh", "hxx":
		return "cpp"
	}
	return ""
}

// newLexer builds the lexer lexerName named; its rules are compiled when
// it first tokenises.
func newLexer(name string) chroma.Lexer {
	var rules func() chroma.Rules
	switch name {
	case "go":
		rules = goRules
	case "python":
		rules = pythonRules
	case "javascript":
		rules = jsRules
	case "shell":
		rules = shellRules
	case "json":
		rules = jsonRules
	case "yaml":
		rules = yamlRules
	case "diff":
		rules = diffRules
	case "rust":
		rules = rustRules
	case "c":
		rules = func() chroma.Rules { return cRules(false) }
	case "cpp":
		rules = func() chroma.Rules { return cRules(true) }
	default:
		return nil
	}
	return chroma.MustNewLexer(&chroma.Config{Name: name, EnsureNL: true}, rules)
}

// words matches any of ws as a whole word.
func words(ws ...string) string { return `(?:` + strings.Join(ws, "|") + `)\b` }

// Patterns the languages share.
const (
	ident     = `[\p{L}_][\p{L}\p{N}_]*`
	funcCall  = ident + `(?=\s*\()`
	number    = `(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*(?:\.[\d_]+)?(?:[eE][+-]?\d+)?|\.\d[\d_]*(?:[eE][+-]?\d+)?)[\p{L}\p{N}_]*`
	punct     = `[{}()\[\];,]`
	operators = `[-+*%&|^!=<>?:.~]+`
)

// identifiers matches an identifier and gives it its type in kinds, else
// NameFunction before a "(", else Name: one rule, not one per word list
// (each rule tried and failed costs a regular expression run).
func identifiers(kinds map[string]chroma.TokenType) chroma.Rule {
	return rule(`[\p{L}_$][\p{L}\p{N}_$]*(?=(\s*\()?)`, chroma.EmitterFunc(func(groups []string, _ *chroma.LexerState) chroma.Iterator {
		t, ok := kinds[groups[0]]
		switch {
		case ok:
		case len(groups) > 1 && groups[1] != "":
			t = chroma.NameFunction
		default:
			t = chroma.Name
		}
		return chroma.Literator(chroma.Token{Type: t, Value: groups[0]})
	}))
}

// kinds maps each word of each list to its type.
func kinds(lists map[chroma.TokenType][]string) map[string]chroma.TokenType {
	m := map[string]chroma.TokenType{}
	for t, words := range lists {
		for _, w := range words {
			m[w] = t
		}
	}
	return m
}

// rule is a chroma rule.
func rule(pattern string, t chroma.Emitter, m ...chroma.Mutator) chroma.Rule {
	r := chroma.Rule{Pattern: pattern, Type: t}
	if len(m) > 0 {
		r.Mutator = m[0]
	}
	return r
}

// quoted is the state inside a string that end closes, with backslash
// escapes; a newline ends a one-line string. extra rules come first and
// stop before the characters in stops (an interpolation's $).
func quoted(end string, multiline bool, stops string, extra ...chroma.Rule) []chroma.Rule {
	rs := []chroma.Rule{
		rule(`\\[\s\S]?`, chroma.LiteralStringEscape),
		rule(regexp.QuoteMeta(end), chroma.LiteralString, chroma.Pop(1)),
	}
	if multiline {
		rs = append(rs, rule(`\n`, chroma.LiteralString))
	} else {
		rs = append(rs, rule(`\n`, chroma.Text, chroma.Pop(1)))
	}
	rs = append(rs, extra...)
	return append(rs,
		rule(`[^\\\n`+regexp.QuoteMeta(end[:1]+stops)+`]+`, chroma.LiteralString),
		rule(`.`, chroma.LiteralString))
}

// raw is the state inside a string without escapes that end closes.
func raw(end string) []chroma.Rule {
	return []chroma.Rule{
		rule(regexp.QuoteMeta(end), chroma.LiteralString, chroma.Pop(1)),
		rule(`[^`+regexp.QuoteMeta(end[:1])+`]+`, chroma.LiteralString),
		rule(`[\s\S]`, chroma.LiteralString),
	}
}

// blockComment is the state inside a /* */ comment.
func blockComment() []chroma.Rule {
	return []chroma.Rule{
		rule(`\*/`, chroma.CommentMultiline, chroma.Pop(1)),
		rule(`[^*]+`, chroma.CommentMultiline),
		rule(`\*`, chroma.CommentMultiline),
	}
}

// cLike is a C-family language: // and /* */ comments, "strings", and the
// words given; before are its own rules, tried first.
type cLike struct {
	keywords, types, constants, builtins []string
	before                               []chroma.Rule
	sqStrings, template, multiline       bool
}

func (c cLike) rules() chroma.Rules {
	// The commonest tokens first: each rule tried before the one that
	// matches costs a regular expression run.
	root := []chroma.Rule{rule(`\s+`, chroma.Text)}
	root = append(root, c.before...)
	root = append(root,
		identifiers(kinds(map[chroma.TokenType][]string{chroma.Keyword: c.keywords, chroma.KeywordConstant: c.constants,
			chroma.KeywordType: c.types, chroma.NameBuiltin: c.builtins})),
		rule(punct, chroma.Punctuation),
		rule(`//[^\n]*`, chroma.CommentSingle),
		rule(`/\*`, chroma.CommentMultiline, chroma.Push("comment")),
		rule(operators, chroma.Operator),
		rule(`"`, chroma.LiteralString, chroma.Push("dq")))
	if c.sqStrings {
		root = append(root, rule(`'`, chroma.LiteralString, chroma.Push("sq")))
	} else {
		root = append(root, rule(`'(?:\\(?:x[0-9A-Fa-f]{2}|u\{?[0-9A-Fa-f]{1,8}\}?|U[0-9A-Fa-f]{8}|[0-7]{1,3}|.)|[^'\\\n])'`, chroma.LiteralStringChar))
	}
	rules := chroma.Rules{
		"comment": blockComment(),
		"dq":      quoted(`"`, c.multiline, ""),
		"sq":      quoted(`'`, false, ""),
	}
	if c.template {
		root = append(root, rule("`", chroma.LiteralString, chroma.Push("template")))
		rules["template"] = quoted("`", true, "$", rule(`\$\{`, chroma.LiteralStringInterpol, chroma.Push("interp")))
		// ${…} holds code, whose braces nest.
		rules["interp"] = []chroma.Rule{
			rule(`\}`, chroma.LiteralStringInterpol, chroma.Pop(1)),
			rule(`\{`, chroma.Punctuation, chroma.Push("brace")),
			chroma.Include("root"),
		}
		rules["brace"] = []chroma.Rule{
			rule(`\}`, chroma.Punctuation, chroma.Pop(1)),
			rule(`\{`, chroma.Punctuation, chroma.Push("brace")),
			chroma.Include("root"),
		}
	} else {
		root = append(root, rule("`", chroma.LiteralStringBacktick, chroma.Push("raw")))
		rules["raw"] = raw("`")
	}
	root = append(root,
		rule(number, chroma.LiteralNumber),
		rule(`.`, chroma.Text))
	rules["root"] = root
	return rules
}

func goRules() chroma.Rules {
	return cLike{
		keywords: []string{"break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough",
			"for", "func", "go", "goto", "if", "import", "interface", "map", "package", "range", "return",
			"select", "struct", "switch", "type", "var"},
		types: []string{"any", "bool", "byte", "comparable", "complex64", "complex128", "error", "float32", "float64",
			"int", "int8", "int16", "int32", "int64", "rune", "string", "uint", "uint8", "uint16", "uint32",
			"uint64", "uintptr"},
		constants: []string{"true", "false", "nil", "iota"},
		builtins: []string{"append", "cap", "clear", "close", "complex", "copy", "delete", "imag", "len", "make",
			"max", "min", "new", "panic", "print", "println", "real", "recover"},
	}.rules()
}

func jsRules() chroma.Rules {
	return cLike{
		keywords: []string{"abstract", "as", "async", "await", "break", "case", "catch", "class", "const", "continue",
			"debugger", "declare", "default", "delete", "do", "else", "enum", "export", "extends", "finally", "for",
			"from", "function", "if", "implements", "import", "in", "instanceof", "interface", "keyof", "let",
			"namespace", "new", "of", "private", "protected", "public", "readonly", "return", "satisfies", "static",
			"super", "switch", "this", "throw", "try", "type", "typeof", "var", "void", "while", "with", "yield"},
		types:     []string{"any", "bigint", "boolean", "never", "number", "object", "string", "symbol", "unknown"},
		constants: []string{"true", "false", "null", "undefined", "NaN", "Infinity"},
		builtins: []string{"Array", "Boolean", "Date", "Error", "JSON", "Map", "Math", "Number", "Object", "Promise",
			"RegExp", "Set", "String", "Symbol", "console", "document", "exports", "module", "process", "require",
			"window"},
		before:    []chroma.Rule{rule(`@[\p{L}_$][\p{L}\p{N}_$.]*`, chroma.NameDecorator)},
		sqStrings: true,
		template:  true,
	}.rules()
}

func rustRules() chroma.Rules {
	return cLike{
		keywords: []string{"as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
			"extern", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
			"return", "static", "struct", "super", "trait", "type", "unsafe", "use", "where", "while"},
		types: []string{"bool", "char", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "str", "u8", "u16",
			"u32", "u64", "u128", "usize", "Self", "String", "Vec", "Option", "Result", "Box"},
		constants: []string{"true", "false", "None", "Some", "Ok", "Err", "self"},
		before: []chroma.Rule{
			rule(`#!?\[[^\]\n]{0,200}\]`, chroma.CommentPreproc),
			rule(`b?r#+"`, chroma.LiteralString, chroma.Push("rawhash")),
			rule(`b?r"`, chroma.LiteralString, chroma.Push("rawdq")),
			rule(`b"`, chroma.LiteralString, chroma.Push("dq")),
			rule(`b?'(?:\\(?:x[0-9A-Fa-f]{2}|u\{[0-9A-Fa-f]{1,6}\}|.)|[^'\\\n])'`, chroma.LiteralStringChar),
			rule(`'`+ident, chroma.NameLabel), // a lifetime
			rule(ident+`!(?=\s*[(\[{])`, chroma.NameFunction),
		},
		multiline: true,
	}.rules().Merge(chroma.Rules{"rawhash": raw(`"#`), "rawdq": raw(`"`)})
}

func cRules(cpp bool) chroma.Rules {
	c := cLike{
		keywords: []string{"auto", "break", "case", "const", "continue", "default", "do", "else", "enum", "extern",
			"for", "goto", "if", "inline", "register", "restrict", "return", "sizeof", "static", "struct",
			"switch", "typedef", "union", "volatile", "while", "_Alignas", "_Alignof", "_Atomic", "_Generic",
			"_Noreturn", "_Static_assert", "_Thread_local"},
		types: []string{"bool", "char", "double", "float", "int", "long", "short", "signed", "unsigned", "void",
			"_Bool", "size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "wchar_t", "FILE",
			"int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t"},
		constants: []string{"NULL", "true", "false"},
		before:    []chroma.Rule{rule(`#[ \t]*[a-z]+\b[^\n]*`, chroma.CommentPreproc)},
	}
	if cpp {
		c.keywords = append(c.keywords, "alignas", "alignof", "catch", "class", "concept", "consteval", "constexpr",
			"constinit", "co_await", "co_return", "co_yield", "decltype", "delete", "explicit", "export", "final",
			"friend", "mutable", "namespace", "new", "noexcept", "operator", "override", "private", "protected",
			"public", "requires", "static_assert", "template", "this", "throw", "try", "typeid", "typename",
			"using", "virtual")
		c.types = append(c.types, "string", "vector", "map", "unique_ptr", "shared_ptr")
		c.constants = append(c.constants, "nullptr")
	}
	return c.rules()
}

func pythonRules() chroma.Rules {
	const prefix = `(?i:[rbuf]{0,2})`
	return chroma.Rules{
		"root": {
			rule(`\s+`, chroma.Text),
			rule(`#[^\n]*`, chroma.CommentSingle),
			rule(`@`+ident+`(?:\.`+ident+`)*`, chroma.NameDecorator),
			rule(prefix+`"""`, chroma.LiteralString, chroma.Push("tdq")),
			rule(prefix+`'''`, chroma.LiteralString, chroma.Push("tsq")),
			rule(prefix+`"`, chroma.LiteralString, chroma.Push("dq")),
			rule(prefix+`'`, chroma.LiteralString, chroma.Push("sq")),
			rule(`(def)(\s+)(`+ident+`)`, chroma.ByGroups(chroma.Keyword, chroma.Text, chroma.NameFunction)),
			rule(`(class)(\s+)(`+ident+`)`, chroma.ByGroups(chroma.Keyword, chroma.Text, chroma.NameClass)),
			rule(number, chroma.LiteralNumber),
			rule(words("and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
				"else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
				"nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"), chroma.Keyword),
			rule(words("True", "False", "None"), chroma.KeywordConstant),
			rule(words("self", "cls", "print", "len", "range", "str", "int", "float", "list", "dict", "set", "tuple",
				"bool", "bytes", "object", "type", "isinstance", "super", "open", "enumerate", "zip", "map", "filter",
				"sorted", "min", "max", "sum", "any", "all", "abs", "repr", "iter", "next", "Exception"), chroma.NameBuiltin),
			rule(funcCall, chroma.NameFunction),
			rule(ident, chroma.Name),
			rule(`[-+*/%&|^!=<>~:.@]+`, chroma.Operator),
			rule(punct, chroma.Punctuation),
			rule(`.`, chroma.Text),
		},
		"tdq": quoted(`"""`, true, ""),
		"tsq": quoted(`'''`, true, ""),
		"dq":  quoted(`"`, false, ""),
		"sq":  quoted(`'`, false, ""),
	}
}

func shellRules() chroma.Rules {
	const end = `(?=[\s;&|)]|$)` // a word ends
	variable := []chroma.Rule{
		rule(`\$\{[^}\n]{0,200}\}`, chroma.NameVariable),
		rule(`\$(?:`+ident+`|[@*#?$!0-9-])`, chroma.NameVariable),
	}
	root := []chroma.Rule{
		rule(`\s+`, chroma.Text),
		rule(`#[^\n]*`, chroma.CommentSingle),
	}
	root = append(root, variable...)
	root = append(root,
		rule(`\$\(\(?`, chroma.Punctuation),
		rule(`"`, chroma.LiteralString, chroma.Push("dq")),
		rule(`\$?'`, chroma.LiteralString, chroma.Push("sq")),
		rule("`", chroma.LiteralStringBacktick, chroma.Push("backtick")),
		rule(`\\[\s\S]?`, chroma.LiteralStringEscape),
		rule(`(?:if|then|else|elif|fi|for|while|until|do|done|case|esac|in|function|select|time)`+end, chroma.Keyword),
		rule(`(?:alias|bg|cd|command|declare|echo|eval|exec|exit|export|fg|getopts|hash|jobs|kill|let|local|printf|pwd|read|readonly|return|set|shift|source|test|trap|type|ulimit|umask|unalias|unset|wait|true|false)`+end, chroma.NameBuiltin),
		rule(ident+`(?=\+?=)`, chroma.NameVariable),
		rule(`[;&|<>(){}\[\]!]+`, chroma.Punctuation),
		rule("[^\\s\"'$\\\\;&|<>(){}`#][^\\s\"'$\\\\;&|<>(){}`]*", chroma.Text),
		rule(`.`, chroma.Text),
	)
	return chroma.Rules{
		"root":     root,
		"dq":       quoted(`"`, true, "$", variable...),
		"sq":       raw(`'`),
		"backtick": raw("`"),
	}
}

func jsonRules() chroma.Rules {
	return chroma.Rules{
		"root": {
			rule(`\s+`, chroma.Text),
			rule(`//[^\n]*`, chroma.CommentSingle),
			rule(`/\*`, chroma.CommentMultiline, chroma.Push("comment")),
			rule(`"(?:[^"\\\n]|\\.)*"(?=\s*:)`, chroma.NameTag),
			rule(`"`, chroma.LiteralString, chroma.Push("dq")),
			rule(`-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?`, chroma.LiteralNumber),
			rule(words("true", "false", "null"), chroma.KeywordConstant),
			rule(`[{}\[\],:]`, chroma.Punctuation),
			rule(`.`, chroma.Text),
		},
		"comment": blockComment(),
		"dq":      quoted(`"`, false, ""),
	}
}

func yamlRules() chroma.Rules {
	const value = `(?=[^\S\n]*(?:#|$))` // the rest of the line is blank or a comment
	return chroma.Rules{
		"root": {
			rule(`\n`, chroma.Text),
			rule(`[^\S\n]+`, chroma.Text),
			rule(`#[^\n]*`, chroma.CommentSingle),
			rule(`^(?:---|\.\.\.)(?=\s|$)`, chroma.Keyword),
			// a key: bounded, so that a line of words is not rescanned from each
			rule(`(`+ident+`[\p{L}\p{N}_ ./$-]{0,80}?|"[^"\n]{0,80}"|'[^'\n]{0,80}')([^\S\n]*)(:)(?=\s|$)`,
				chroma.ByGroups(chroma.NameTag, chroma.Text, chroma.Punctuation)),
			rule(`"`, chroma.LiteralString, chroma.Push("dq")),
			rule(`'`, chroma.LiteralString, chroma.Push("sq")),
			rule(`(?i:true|false|yes|no|on|off|null|~)`+value, chroma.KeywordConstant),
			rule(`[-+]?(?:0x[0-9a-fA-F]+|\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.inf|\.nan)`+value, chroma.LiteralNumber),
			rule(`[&*][\p{L}\p{N}_-]+`, chroma.NameLabel),
			rule(`!!?[\p{L}\p{N}_/.-]*`, chroma.KeywordType),
			rule(`[\[\]{},]`, chroma.Punctuation),
			rule(`[?:|>-](?=\s|$)`, chroma.Punctuation),
			rule(`[^\s"'#][^\s]*`, chroma.Text),
			rule(`.`, chroma.Text),
		},
		"dq": quoted(`"`, true, ""),
		"sq": {
			rule(`''`, chroma.LiteralStringEscape),
			rule(`'`, chroma.LiteralString, chroma.Pop(1)),
			rule(`[^']+`, chroma.LiteralString),
		},
	}
}

func diffRules() chroma.Rules {
	return chroma.Rules{
		"root": {
			rule(`\n`, chroma.Text),
			rule(`^(?:diff|index|new file mode|deleted file mode|similarity index|rename from|rename to|old mode|new mode)\b[^\n]*`, chroma.GenericHeading),
			rule(`^(?:---|\+\+\+)[ \t][^\n]*`, chroma.GenericHeading),
			rule(`^@@[^\n]*`, chroma.GenericSubheading),
			rule(`^[+>][^\n]*`, chroma.GenericInserted),
			rule(`^[-<][^\n]*`, chroma.GenericDeleted),
			rule(`[^\n]+`, chroma.Text),
		},
	}
}
