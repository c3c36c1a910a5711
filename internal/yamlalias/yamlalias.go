// Package yamlalias bounds what the aliases of a YAML document expand to,
// so that a file of a few hundred bytes cannot make a decoder build
// millions of nodes (a "billion laughs" bomb). Check runs on the parsed
// document, before anything is decoded.
package yamlalias

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
)

// MaxNodes is the default bound: the nodes aliases may stand for in one
// file, counted with every alias expanded. A configuration that reuses a
// block through an alias stays far below it.
const MaxNodes = 10_000

// Error is a document whose aliases expand past the bound.
type Error struct {
	Line  int // the line of the alias that crossed the bound
	Limit int
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Message()) }

// Message is the error without its line, for readers that place it
// themselves.
func (e *Error) Message() string {
	return fmt.Sprintf("YAML aliases expand to more than %d nodes (an alias bomb?); write the values out instead", e.Limit)
}

// Check returns an *Error when the aliases of file stand for more than
// limit nodes in all, counting each alias as the nodes of its anchor's
// value with the aliases inside expanded too; nil otherwise.
func Check(file *ast.File, limit int) error {
	if file == nil {
		return nil
	}
	c := counter{limit: limit, anchors: map[string]int{}}
	for _, doc := range file.Docs {
		if _, err := c.size(doc); err != nil {
			return err
		}
	}
	return nil
}

// counter walks a document in order, as a decoder would resolve it.
type counter struct {
	limit    int
	expanded int            // nodes the aliases seen so far stand for
	anchors  map[string]int // an anchor's expanded size, by name
}

// size returns how many nodes n stands for with its aliases expanded.
// It is at most the document's length plus the limit, so it never
// overflows.
func (c *counter) size(n ast.Node) (int, error) {
	switch v := n.(type) {
	case nil:
		return 0, nil
	case *ast.AliasNode:
		s, ok := c.anchors[name(v.Value)]
		if !ok {
			s = 1 // an unknown alias: the decoder reports it
		}
		c.expanded += s
		if c.expanded > c.limit {
			line := 0
			if tk := v.GetToken(); tk != nil && tk.Position != nil {
				line = tk.Position.Line
			}
			return 0, &Error{Line: line, Limit: c.limit}
		}
		return s, nil
	case *ast.AnchorNode:
		s, err := c.size(v.Value)
		if err == nil {
			c.anchors[name(v.Name)] = s
		}
		return s, err
	case *ast.DocumentNode:
		return c.size(v.Body)
	case *ast.TagNode:
		return c.size(v.Value)
	case *ast.MappingKeyNode:
		return c.size(v.Value)
	case *ast.MappingValueNode:
		return c.sum(0, v.Key, v.Value)
	case *ast.MappingNode:
		nodes := make([]ast.Node, len(v.Values))
		for i, mv := range v.Values {
			nodes[i] = mv
		}
		return c.sum(1, nodes...)
	case *ast.SequenceNode:
		return c.sum(1, v.Values...)
	case *ast.CommentGroupNode, *ast.CommentNode:
		return 0, nil
	}
	return 1, nil
}

// sum is base plus the sizes of nodes.
func (c *counter) sum(base int, nodes ...ast.Node) (int, error) {
	total := base
	for _, n := range nodes {
		s, err := c.size(n)
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

// name is the text of an anchor's or alias's name node.
func name(n ast.Node) string {
	if n == nil || n.GetToken() == nil {
		return ""
	}
	return n.GetToken().Value
}
