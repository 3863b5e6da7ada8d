//go:build linux

package native_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/testenv"
	"github.com/codecell-dev/codecell/tier/native"
)

// An index and a registry of the operator's own, over HTTPS with an
// authority of their own (packages_ca_file), on a private address
// (packages_network): pip installs from the index, npm from the
// registry, and the npm package's install script, which would write a
// file beside the package, does not run (--ignore-scripts).
func TestPackagesOwnSources(t *testing.T) {
	testenv.RequireNative(t, native.Default.Probe)
	wheels := t.TempDir()
	testenv.Wheel(t, wheels, "ccpkgindex", "1.0.0", "VALUE = 7\n")
	wheel, err := os.ReadFile(filepath.Join(wheels, "ccpkgindex-1.0.0-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	tgz := npmTarball(t, map[string]string{
		"package/package.json": `{"name": "ccpkgscript", "version": "1.0.0", "main": "index.js",
  "scripts": {"install": "node -e \"require('fs').writeFileSync('SCRIPT-RAN', 'x')\""}}`,
		"package/index.js": "module.exports = 42;\n",
	})
	var hits atomic.Int64
	var port int
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/ccpkgindex/", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		sum := sha256.Sum256(wheel)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/ccpkgindex-1.0.0-py3-none-any.whl#sha256=%s">ccpkgindex-1.0.0-py3-none-any.whl</a></body></html>`, hex.EncodeToString(sum[:]))
	})
	mux.HandleFunc("/files/ccpkgindex-1.0.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(wheel)
	})
	mux.HandleFunc("/ccpkgscript", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		s1 := sha1.Sum(tgz)
		s512 := sha512.Sum512(tgz)
		version := map[string]any{"name": "ccpkgscript", "version": "1.0.0", "hasInstallScript": true,
			"scripts": map[string]string{"install": "node -e \"require('fs').writeFileSync('SCRIPT-RAN', 'x')\""},
			"dist": map[string]string{"tarball": fmt.Sprintf("https://example.com:%d/tarballs/ccpkgscript-1.0.0.tgz", port),
				"shasum": hex.EncodeToString(s1[:]), "integrity": "sha512-" + base64.StdEncoding.EncodeToString(s512[:])}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"name": "ccpkgscript", "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": version}})
	})
	mux.HandleFunc("/tarballs/ccpkgscript-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(tgz)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	port = srv.Listener.Addr().(*net.TCPAddr).Port
	// The test server's certificate names example.com: the proxy resolves
	// that name to it.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	tier := &native.Tier{Pool: -1, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "example.com" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}}
	t.Cleanup(func() { tier.Close() })
	cache := filepath.Join(testenv.ReachableDir(t), "cache")
	e := &codecell.Engine{Tier: native.Name, Tiers: []codecell.Tier{tier}, Packages: codecell.PackageSources{
		CacheDir: cache, CAFile: ca, Network: []string{"127.0.0.0/8"},
		PythonIndex: fmt.Sprintf("https://example.com:%d/simple", port), NPMRegistry: fmt.Sprintf("https://example.com:%d/", port)}}

	res := runWith(t, e, "python", "import ccpkgindex\nccpkgindex.VALUE", codecell.Packages{"python": {"ccpkgindex==1.0.0"}})
	if res.Status != codecell.StatusSuccess || string(res.Value) != "7" {
		t.Fatalf("python: %s %s %+v\n%s", res.Status, res.Value, res.Error, res.Stderr)
	}
	res = runWith(t, e, "javascript", "const fs = require('fs'), path = require('path');\n"+
		"const dir = path.dirname(require.resolve('ccpkgscript'));\n[require('ccpkgscript'), fs.existsSync(path.join(dir, 'SCRIPT-RAN'))]",
		codecell.Packages{"javascript": {"ccpkgscript@1.0.0"}})
	if res.Status != codecell.StatusSuccess || string(res.Value) != "[42,false]" {
		t.Fatalf("javascript: %s %s %+v\n%s", res.Status, res.Value, res.Error, res.Stderr)
	}
	if hits.Load() < 4 {
		t.Fatalf("the sources served %d requests", hits.Load())
	}
	filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "SCRIPT-RAN" {
			t.Errorf("an install script ran: %s", p)
		}
		return nil
	})

	// Without the authority, the registry is not trusted, and the
	// Result says so in npm's words.
	e.Packages.CAFile = ""
	res = runWith(t, e, "javascript", "1", codecell.Packages{"javascript": {"ccpkgscript"}})
	if res.Status != codecell.StatusBlocked || res.Error.Code != codecell.CodePackageInstallFailed || !strings.Contains(res.Error.Message, "certificate") {
		t.Fatalf("untrusted registry: %s %+v", res.Status, res.Error)
	}
}

// npmTarball is a package's .tgz as the registry serves it.
func npmTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(data))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}
