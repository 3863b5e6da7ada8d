// Package npm reads what npm installed.
package npm

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Version is the version of pkg installed under prefix (in
// prefix/node_modules), "" when none is.
func Version(prefix, pkg string) string {
	data, err := os.ReadFile(filepath.Join(prefix, "node_modules", filepath.FromSlash(pkg), "package.json"))
	if err != nil {
		return ""
	}
	var meta struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(data, &meta)
	return meta.Version
}
