package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
	"github.com/codecell-dev/codecell/client"
	"github.com/codecell-dev/codecell/lang"
)

// runRemote runs a program on a codecell service (codecell serve) with the
// Go client: the same output, Result and exit codes as a run here.
func (m *Main) runRemote(ctx context.Context, f runFlags, file string, args []string) int {
	switch {
	case f.remote == "":
		fmt.Fprintln(m.Stderr, "codecell run: --session needs --remote URL")
		return exitUsage
	case f.workspace != "" || f.config != "" || len(f.mounts) > 0 || len(f.interpreters) > 0 || f.markdown:
		fmt.Fprintln(m.Stderr, "codecell run: --workspace, --config, --mount, --interpreter and --from-markdown apply to runs here, not with --remote; upload files to a session instead of --workspace")
		return exitUsage
	}
	if u, err := url.Parse(f.remote); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		example := "http://127.0.0.1:8080"
		if !strings.Contains(f.remote, "://") && f.remote != "" {
			example = "http://" + f.remote
		}
		fmt.Fprintf(m.Stderr, "codecell run: --remote %s is not the URL of a codecell service; give its scheme and host, such as %s\n", f.remote, example)
		return exitUsage
	}
	lim, err := f.limits()
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		return exitUsage
	}
	guard, err := f.guard.guard()
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		return exitUsage
	}
	src, err := m.readSource(file)
	if err != nil {
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		return exitUsage
	}
	x := api.Execution{Language: f.lang, Code: string(src), Args: args, Tier: f.tier}
	if file != "-" {
		x.Filename = filepath.Base(file)
		// Standard input stays the program's when the code came from a
		// file, as in a run here: read whole, unless it is a terminal
		// (a program on a service cannot read from one as it types).
		in, err := remoteStdin(m.Stdin)
		if err != nil {
			fmt.Fprintf(m.Stderr, "codecell run: standard input: %v\n", err)
			return exitUsage
		}
		x.Stdin = in
	}
	if x.Language == "" {
		l := lang.ForFile(x.Filename, x.Code)
		if l == nil {
			fmt.Fprintf(m.Stderr, "codecell run: cannot tell the language of %s; pass --lang (one of %s)\n", file, strings.Join(lang.Names(), ", "))
			return exitBlocked
		}
		x.Language = l.Name
	}
	// The code-size limit of a run here is generous for a file on disk; a
	// service has its own ceiling, so ask only for what this file needs
	// beyond the default and let the service say if that is too much.
	lim.CodeSize = 0
	if n := utf8.RuneCountInString(x.Code); n > codecell.DefaultLimits.CodeSize {
		lim.CodeSize = n
	}
	if lim != (codecell.Limits{}) {
		l := api.LimitsOf(lim)
		x.Limits = &l
	}
	x.Packages = f.packagesFor(x.Language)
	if guard != nil || f.network() != nil {
		x.Policy = &api.Policy{Guard: guard, Network: f.network()}
	}
	c := client.New(f.remote, os.Getenv("CODECELL_TOKEN"))
	c.Approve = m.remoteApprover()
	var res *codecell.Result
	if f.json {
		res, err = c.Execute(ctx, f.session, x)
	} else {
		res, err = c.Stream(ctx, f.session, x, func(stream, text string) {
			if stream == api.EventStderr {
				io.WriteString(m.Stderr, text)
			} else {
				io.WriteString(m.Stdout, text)
			}
		})
	}
	if err != nil {
		if ctx.Err() != nil {
			return m.interrupted(ctx.Err())
		}
		fmt.Fprintf(m.Stderr, "codecell run: %v\n", err)
		if e, ok := err.(*client.Error); ok && e.Envelope != nil {
			for _, h := range e.Envelope.Hints {
				fmt.Fprintf(m.Stderr, "  hint: %s\n", h)
			}
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Fprintf(m.Stderr, "  hint: nothing answers at %s: start the service there (codecell serve --addr HOST:PORT), or correct --remote\n", f.remote)
		}
		return exitInternal
	}
	if f.json {
		m.printJSON(res)
	} else {
		m.explain(res)
	}
	return exitCode(res)
}

// maxRemoteStdin bounds the standard input sent with a remote run: it
// travels in the request's JSON body.
const maxRemoteStdin = 16 << 20

// remoteStdin reads what a remote program gets as standard input: all of
// r, unless r is a terminal, which gives nothing.
func remoteStdin(r io.Reader) (string, error) {
	if f, ok := r.(*os.File); ok {
		info, err := f.Stat()
		if err != nil || info.Mode()&os.ModeCharDevice != 0 {
			return "", nil
		}
	}
	b, err := io.ReadAll(io.LimitReader(r, maxRemoteStdin+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxRemoteStdin {
		return "", fmt.Errorf("over %d MiB; upload large input to a session as a file instead", maxRemoteStdin>>20)
	}
	return string(b), nil
}
