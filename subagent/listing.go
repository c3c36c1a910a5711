package subagent

// ChildRow is one child in a listing: a classified child, or, when
// Diagnostic is set, one that could not be classified.
type ChildRow struct {
	ID          string
	Mode        Mode
	Label       string
	Live        bool // its session is live in this process (activity running); else inactive
	HasChildren bool // some stored or live session is its subagent child
	// Diagnostic is "corrupt" (no valid descriptor, or a log that does not
	// read) or "unavailable" (it could not be read now; a later listing
	// tries again). Mode and Label are then empty.
	Diagnostic string
	Parent     string // the child's parent
	Depth      int    // 1 for a direct child of the listing's root
	// Remote is an out-of-process child's conversation id in its product
	// (for a dsh child, the session its process writes, also listed).
	Remote string
}

// The diagnostics of a listing.
const (
	DiagnosticCorrupt     = "corrupt"
	DiagnosticUnavailable = "unavailable"
)
