package codecell

// Packages for programs: the pipeline's hook (run.packages, between
// prepare and run) and the installer, which runs pip or npm in a sandbox
// of the native tier that reaches only the package source, and keeps what
// they installed in a cache (internal/packages) that runs see read-only.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/codecell-dev/codecell/internal/packages"
	"github.com/codecell-dev/codecell/lang"
)

// Packages are the packages a program imports, by language: "python"
// (pip requirements: "humanize==4.9.0") and "javascript" (npm packages:
// "lodash@4.17.21"; TypeScript uses them too).
type Packages map[string][]string

// PackageSources says where the packages programs ask for come from, and
// where codecell keeps them once installed. The zero value installs
// Python packages from PyPI and JavaScript ones from the npm registry,
// into DefaultPackageCache.
type PackageSources struct {
	// Base are packages every program of their language gets, besides
	// those it asks for (the configuration's "packages").
	Base Packages
	// CacheDir holds installed packages, one directory per exact list
	// and interpreter; empty means the default (see DefaultPackageCache).
	// When codecell runs as root, sandboxes run as other users, who must
	// be able to enter it.
	CacheDir string
	// PythonIndex is the package index pip installs from, such as
	// "https://pypi.org/simple" (the default): the installing sandbox
	// reaches its host, and for PyPI files.pythonhosted.org, and nothing
	// else.
	PythonIndex string
	// PythonWheels, when set, is a host directory of wheels that pip
	// installs from instead of an index: the installing sandbox then has
	// no network at all.
	PythonWheels string
	// NPMRegistry is the registry npm installs from; empty means
	// "https://registry.npmjs.org/".
	NPMRegistry string
	// Network adds entries to the installing sandbox's network allow
	// list, written as a network policy's: address ranges
	// ("10.0.0.0/8") for an index or registry on a private network (a
	// name resolving to such an address is refused otherwise), or more
	// hosts the source sends downloads to. Not used with PythonWheels.
	Network []string
	// CAFile, when set, is a PEM file of certificate authorities the
	// installer trusts besides the system's: those of an index or a
	// registry of the operator's own.
	CAFile string
	// Timeout bounds one install; 0 means 5 minutes.
	Timeout time.Duration
}

// DefaultPackageCache is the cache directory of PackageSources that set
// none: /var/cache/codecell/packages as root, else
// $XDG_CACHE_HOME/codecell/packages (~/.cache/codecell/packages).
func DefaultPackageCache() string { return packages.DefaultDir() }

// PackageReport is what a Result says of one language's packages.
type PackageReport struct {
	// List is the list as installed: normalised and sorted.
	List []string `json:"list"`
	// Cached is true when an earlier run had installed the list.
	Cached bool `json:"cached"`
	// InstallMS is how long getting them took: the install, or finding
	// them in the cache (waiting for another run's install of the same
	// list included).
	InstallMS int64 `json:"install_ms"`
}

// Where programs see their packages, and the installer its wheels.
const (
	packagesView       = "/opt/codecell/packages"
	pythonPackagesView = packagesView + "/python"
	nodePackagesView   = packagesView + "/node"
	wheelsView         = "/opt/codecell/wheels"
)

const (
	defaultPythonIndex = "https://pypi.org/simple"
	defaultNPMRegistry = "https://registry.npmjs.org/"
)

// packageLanguage is the language whose packages a program of language
// name imports: "python", "javascript", or "" for none.
func packageLanguage(name string) string {
	switch name {
	case "python":
		return "python"
	case "javascript", "typescript":
		return "javascript"
	}
	return ""
}

// Check refuses a language that has no packages, or a list that is not
// one of packages codecell installs.
func (p Packages) Check() error {
	for k, list := range p {
		l := lang.Lookup(k)
		if l == nil || packageLanguage(l.Name) == "" {
			return fmt.Errorf("packages for %q: codecell installs packages for \"python\" and \"javascript\"", k)
		}
		if _, err := normalizePackages(packageLanguage(l.Name), list); err != nil {
			return err
		}
	}
	return nil
}

// Refusal is Check's error as a request's refusal: nil when p is fine.
func (p Packages) Refusal() *Envelope {
	if err := p.Check(); err != nil {
		return Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints(packagesHint)
	}
	return nil
}

// forLanguage is the list for a program of language name (whatever key,
// or alias, it was given under).
func (p Packages) forLanguage(name string) []string {
	want := packageLanguage(name)
	if want == "" {
		return nil
	}
	var out []string
	for k, list := range p {
		if l := lang.Lookup(k); l != nil && packageLanguage(l.Name) == want {
			out = append(out, list...)
		}
	}
	return out
}

// With is p and q together: a session's packages and its program's.
func (p Packages) With(q Packages) Packages {
	if len(q) == 0 {
		return p
	}
	if len(p) == 0 {
		return q
	}
	out := Packages{}
	for _, m := range []Packages{p, q} {
		for k, list := range m {
			out[k] = append(slices.Clip(out[k]), list...)
		}
	}
	return out
}

func normalizePackages(kind string, list []string) ([]string, error) {
	if kind == "python" {
		return packages.NormalizePython(list)
	}
	return packages.NormalizeNPM(list)
}

const packagesHint = `packages are {"python": ["humanize==4.9.0"], "javascript": ["lodash@4.17.21"]}: names with optional versions`

// packages gets the packages the program asked for, installed or from the
// cache, and has the run show them. It reports whether the run goes on.
func (r *run) packages(ctx context.Context) bool {
	kind := packageLanguage(r.l.Name)
	all := r.e.Packages.Base.With(r.x.Packages)
	asked := all.forLanguage(r.l.Name)
	if env := all.Refusal(); env != nil {
		block(r.res, env)
		return false
	}
	if len(asked) == 0 || r.static {
		return true
	}
	if mt, ok := r.tier.(MountTier); !ok || !mt.MountsReadOnly() {
		block(r.res, Errorf(KindValidation, CodePolicyUnsupported, "tier %s cannot show a program its packages read-only", r.tier.Name()).WithHints(
			"run on the native tier", "or leave packages out"))
		return false
	}
	list, err := normalizePackages(kind, asked)
	if err != nil {
		block(r.res, Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints(packagesHint))
		return false
	}
	start := time.Now()
	dir, cached, env := r.e.installPackages(ctx, kind, list, r.prog.Argv[0])
	report := PackageReport{List: list, Cached: cached, InstallMS: time.Since(start).Milliseconds()}
	if r.e.Logger != nil {
		r.e.Logger.InfoContext(ctx, "packages", "exec_id", r.res.ID, "language", kind, "list", list, "cached", cached, "install_ms", report.InstallMS, "ok", env == nil)
	}
	if env != nil {
		if env.Retryable {
			r.res.Status, r.res.Error = StatusSandboxError, env
		} else {
			block(r.res, env)
		}
		return false
	}
	r.res.Packages = map[string]PackageReport{kind: report}
	if kind == "python" {
		// The runner puts it on sys.path, after Python's own modules and
		// before the system's packages, as a virtual environment's
		// site-packages is (python runs with -I, which ignores
		// PYTHONPATH).
		r.mounts = append(r.mounts, Mount{Host: dir, Path: pythonPackagesView})
		r.pkgEnv = append(r.pkgEnv, "CODECELL_PYTHONPATH="+pythonPackagesView)
	} else {
		r.mounts = append(r.mounts, Mount{Host: dir, Path: nodePackagesView})
		r.pkgEnv = append(r.pkgEnv, "NODE_PATH="+path.Join(nodePackagesView, "node_modules"))
	}
	return true
}

// livePackages checks the packages of a cell of a live session before
// anything is made for it.
func (r *run) livePackages() bool {
	if env := r.e.Packages.Base.With(r.x.Packages).Refusal(); env != nil {
		block(r.res, env)
		return false
	}
	return true
}

// samePackages refuses a cell that asks for packages its session's
// interpreter was not started with: an interpreter cannot take packages
// while it runs. One that asks for fewer has them all the same.
func (r *run) samePackages(p *liveProc) *Envelope {
	asked := r.e.Packages.Base.With(r.x.Packages).forLanguage(r.l.Name)
	var list []string
	if len(asked) > 0 {
		var err error
		if list, err = normalizePackages(packageLanguage(r.l.Name), asked); err != nil {
			return Errorf(KindValidation, CodeInvalidRequest, "%v", err).WithHints(packagesHint)
		}
	}
	var missing []string
	for _, s := range list {
		if !slices.Contains(p.packages, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return Errorf(KindValidation, CodePolicyUnsupported, "this cell asks for %v, which the session's interpreter was not started with (it has %v), and a running interpreter cannot take packages", missing, p.packages).WithHints(
		"leave the cell's packages out: it has the interpreter's",
		"or restart the session's interpreter (POST /v1/sessions/{id}/restart, or restart: true over MCP) and run a cell with the packages the session needs")
}

// installError is an install that failed for what was asked: the
// installer's own words.
type installError struct{ msg string }

func (e *installError) Error() string { return e.msg }

// installPackages returns the cache's directory for the list, installing
// it first when no run has. interp is the interpreter that will import
// them: the installed files depend on its version.
func (e *Engine) installPackages(ctx context.Context, kind string, list []string, interp string) (string, bool, *Envelope) {
	src := e.Packages
	dir := src.CacheDir
	if dir == "" {
		dir = DefaultPackageCache()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, packageCacheFailure(dir, err)
	}
	if err := packages.Reachable(dir); err != nil {
		return "", false, packageCacheFailure(dir, err)
	}
	interpID := interp
	if real, err := filepath.EvalSymlinks(interp); err == nil {
		interpID = real
		if info, err := os.Stat(real); err == nil {
			interpID += fmt.Sprintf(" %d %d", info.Size(), info.ModTime().UnixNano())
		}
	}
	inst, err := e.packageInstall(kind, list, interp)
	if err != nil {
		return "", false, packageFailure(kind, err.Error())
	}
	key := packages.Key(kind, interpID, inst.source, strings.Join(list, "\n"))
	c := &packages.Cache{Dir: dir}
	got, cached, err := c.Get(ctx, key, inst.run)
	var ie *installError
	switch {
	case errors.As(err, &ie):
		return "", false, packageFailure(kind, ie.msg)
	case err != nil:
		return "", false, packageCacheFailure(dir, err)
	}
	return got, cached, nil
}

func packageFailure(kind, msg string) *Envelope {
	installer := "pip"
	if kind == "javascript" {
		installer = "npm"
	}
	return Errorf(KindValidation, CodePackageInstallFailed, "the %s packages could not be installed: %s", kind, msg).WithHints(
		"check the names and versions against the package source ("+installer+"'s message above says what it could not find)",
		"or leave the package out and do without it")
}

func packageCacheFailure(dir string, err error) *Envelope {
	env := Errorf(KindInternal, CodeSandboxFailure, "the package cache %s: %v", dir, err).WithHints(
		"this is a fault of codecell's set-up, not of the program: its operator sets the cache directory (packages_cache_dir)")
	env.Retryable = true
	return env
}

// packageInstall is one install: the sandboxed program that does it, and
// what of its configuration the result depends on.
type packageInstall struct {
	source string // the index, wheel directory or registry
	run    packages.Install
}

// packageInstall says how to install list for kind: pip or npm, run in a
// sandbox of the native tier whose network reaches only the source (or
// nothing, for a wheel directory), writing into its workspace, never
// running a package's own install scripts (pip takes wheels only, npm
// runs with --ignore-scripts). It runs nothing on the host.
func (e *Engine) packageInstall(kind string, list []string, interp string) (*packageInstall, error) {
	src := e.Packages
	var script, out string
	var network *NetworkPolicy
	var mounts []Mount
	var source string
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = shQuote(s)
	}
	if kind == "python" {
		out = "python"
		args := []string{shQuote(interp), "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir", "--no-input",
			"--only-binary=:all:", "--target", "/workspace/python"}
		if src.PythonWheels != "" {
			wheels, err := filepath.Abs(src.PythonWheels)
			if err != nil {
				return nil, err
			}
			if info, err := os.Stat(wheels); err != nil || !info.IsDir() {
				return nil, fmt.Errorf("the wheel directory %s is not a directory (packages_python_wheels)", src.PythonWheels)
			}
			if err := packages.Reachable(wheels); err != nil {
				return nil, fmt.Errorf("the wheel directory: %v", err)
			}
			// The directory's wheels are part of the key: a list that
			// leaves versions open is installed afresh when they change.
			source = "wheels " + wheels + "\n" + dirListing(wheels)
			mounts = []Mount{{Host: wheels, Path: wheelsView}}
			args = append(args, "--no-index", "--find-links", wheelsView)
		} else {
			index := src.PythonIndex
			if index == "" {
				index = defaultPythonIndex
			}
			hosts, err := sourceHosts(index)
			if err != nil {
				return nil, fmt.Errorf("the Python index %q: %v", index, err)
			}
			if hosts[0] == "pypi.org" {
				// PyPI's index links to its files there.
				hosts = append(hosts, "files.pythonhosted.org")
			}
			source = "index " + index
			network = &NetworkPolicy{Allow: append(hosts, src.Network...)}
			args = append(args, "--index-url", shQuote(index))
		}
		script = "exec " + strings.Join(args, " ") + " -- " + strings.Join(quoted, " ") + " 2>&1\n"
	} else {
		out = "node"
		npm, err := npmCLI(interp)
		if err != nil {
			return nil, err
		}
		registry := src.NPMRegistry
		if registry == "" {
			registry = defaultNPMRegistry
		}
		hosts, err := sourceHosts(registry)
		if err != nil {
			return nil, fmt.Errorf("the npm registry %q: %v", registry, err)
		}
		source = "registry " + registry
		network = &NetworkPolicy{Allow: append(hosts, src.Network...)}
		// The cache is the workspace's, and removed before the files
		// come back: only node/ is kept.
		script = "set -e\nmkdir -p /workspace/node\n" +
			strings.Join([]string{shQuote(interp), shQuote(npm), "install", "--ignore-scripts", "--no-audit", "--no-fund",
				"--no-update-notifier", "--no-package-lock", "--omit=dev", "--loglevel=error",
				"--prefix", "/workspace/node", "--cache", "/workspace/.npm-cache", "--registry", shQuote(registry)}, " ") +
			" -- " + strings.Join(quoted, " ") + " 2>&1 || { status=$?; rm -rf /workspace/.npm-cache; exit $status; }\nrm -rf /workspace/.npm-cache\n"
	}
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	var files []File
	env := installEnv()
	if src.CAFile != "" {
		bundle, err := caBundle(src.CAFile)
		if err != nil {
			return nil, err
		}
		// In the installer's workspace, which is not published.
		files = []File{{Path: ".codecell-ca.pem", Data: bundle}}
		for _, k := range []string{"NODE_EXTRA_CA_CERTS", "PIP_CERT", "npm_config_cafile"} {
			env[k] = "/workspace/.codecell-ca.pem"
		}
	}
	run := func(ctx context.Context, tmp string) (string, error) {
		// The installer's own engine: the native tier, none of the
		// configuration's policy, tools or guardrails (it is codecell's
		// program, not a model's), the package source its only network.
		ie := &Engine{Tier: "native", Tiers: e.Tiers, InitPath: e.InitPath, TempDir: e.TempDir, Logger: e.Logger, Interpreters: e.Interpreters}
		x := &Exec{
			Language:  "sh",
			Code:      script,
			Filename:  "install.sh",
			Workspace: tmp,
			Env:       env,
			Files:     files,
			Limits:    Limits{Timeout: timeout, Memory: 1 << 30, CodeSize: 1 << 20, Stdout: 1 << 20},
			Policy:    Policy{Network: network},
			mounts:    mounts,
		}
		res, err := ie.Run(ctx, x)
		if err != nil {
			return "", err
		}
		switch res.Status {
		case StatusSuccess:
		case StatusTimeout:
			return "", &installError{fmt.Sprintf("the install took longer than %v", timeout)}
		case StatusBlocked, StatusSandboxError:
			msg := "the installer's sandbox could not run"
			if res.Error != nil {
				msg += ": " + res.Error.Message
			}
			return "", &installError{msg}
		default:
			return "", &installError{installerWords(res.Stdout+res.Stderr) + refusedConnections(res.Network)}
		}
		dir := filepath.Join(tmp, out)
		if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
			return "", &installError{"the installer ended without installing anything: " + installerWords(res.Stdout+res.Stderr)}
		}
		return dir, nil
	}
	return &packageInstall{source: source, run: run}, nil
}

// dirListing names the files of dir with their sizes and modification
// times, one a line, sorted.
func dirListing(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range entries { // ReadDir sorts by name
		if info, err := e.Info(); err == nil {
			fmt.Fprintf(&b, "%q %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
		}
	}
	return b.String()
}

// systemBundles are where Linux distributions keep the system's
// certificate authorities, in one file.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"}

// caBundle is the system's authorities and those of caFile, in one PEM
// file: pip takes one file and trusts only what it holds.
func caBundle(caFile string) ([]byte, error) {
	extra, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("the packages' certificate authorities: %v", err)
	}
	if !strings.Contains(string(extra), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("the packages' certificate authorities: %s holds no PEM certificate", caFile)
	}
	var out []byte
	for _, b := range systemBundles {
		if data, err := os.ReadFile(b); err == nil {
			out = append(append(out, data...), '\n')
			break
		}
	}
	return append(out, extra...), nil
}

// installEnv is the installer's environment. Node trusts the certificates
// it was built with, not the system's, as pip does: a registry whose
// certificate comes from an authority the operator added to the system
// store is trusted as pip's index would be.
func installEnv() map[string]string {
	env := map[string]string{"PIP_BREAK_SYSTEM_PACKAGES": "1", "npm_config_update_notifier": "false",
		// npm's retries wait up to a minute each by default: a registry
		// that refuses (an unknown certificate, no route) is reported in
		// seconds, not minutes.
		"npm_config_fetch_retry_mintimeout": "1000", "npm_config_fetch_retry_maxtimeout": "5000"}
	for _, bundle := range systemBundles {
		if _, err := os.Stat(bundle); err == nil {
			env["NODE_EXTRA_CA_CERTS"] = bundle
			break
		}
	}
	return env
}

// installerWords is the end of what the installer printed: where pip and
// npm say what went wrong.
func installerWords(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		// npm's log goes with the installer's sandbox.
		if !strings.Contains(line, "A complete log of this run can be found in") {
			keep = append(keep, line)
		}
	}
	out = strings.TrimSpace(tailLines(strings.TrimSpace(strings.Join(keep, "\n")), 20))
	if len(out) > 4000 {
		out = "…" + out[len(out)-4000:]
	}
	if out == "" {
		return "the installer failed and printed nothing"
	}
	return out
}

// refusedConnections says which of the installer's connections the
// network policy refused, and why: what an operator needs to fix a source
// on a private network.
func refusedConnections(conns []NetworkConnection) string {
	var out []string
	for _, c := range conns {
		if !c.Allowed && !slices.Contains(out, c.Reason) {
			out = append(out, c.Reason)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "\n(codecell refused the installer's connections: " + strings.Join(out, "; ") + "; the operator allows more with packages_network)"
}

// sourceHosts is what a package source's URL lets the installer reach:
// its host, with the port when it is not 443.
func sourceHosts(raw string) ([]string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.User != nil {
		return nil, errors.New("write an https:// URL without credentials")
	}
	host := u.Hostname()
	if p := u.Port(); p != "" && p != "443" {
		host += ":" + p
	}
	return []string{host}, nil
}

// npmCLI finds npm's script next to the node binary that runs it, as
// node's installs lay it out (bin/node, lib/node_modules/npm).
func npmCLI(node string) (string, error) {
	real, err := filepath.EvalSymlinks(node)
	if err != nil {
		return "", err
	}
	cli := filepath.Join(filepath.Dir(filepath.Dir(real)), "lib", "node_modules", "npm", "bin", "npm-cli.js")
	if _, err := os.Stat(cli); err != nil {
		return "", fmt.Errorf("npm is not installed beside %s (looked for %s)", real, cli)
	}
	return cli, nil
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
