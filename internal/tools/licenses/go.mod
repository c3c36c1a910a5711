// A module of its own, so that the licence scanner never becomes a
// dependency of dsh.
module github.com/dsh-go/dsh/internal/tools/licenses

go 1.26.0

require github.com/google/licensecheck v0.3.1
