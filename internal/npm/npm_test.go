package npm

import (
	"os"
	"path/filepath"
	"testing"
)

func TestVersion(t *testing.T) {
	prefix := t.TempDir()
	dir := filepath.Join(prefix, "node_modules", "@scope", "pkg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "@scope/pkg", "version": "1.2.3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := Version(prefix, "@scope/pkg"); v != "1.2.3" {
		t.Errorf("Version = %q", v)
	}
	if v := Version(prefix, "other"); v != "" {
		t.Errorf("a package not installed has version %q", v)
	}
}
