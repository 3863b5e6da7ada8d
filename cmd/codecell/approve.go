package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

// maxPromptArguments bounds the arguments a prompt shows.
const maxPromptArguments = 500

// approver is the Approver of a run here: the terminal's, when codecell's
// own output goes to one.
func (m *Main) approver() codecell.Approver {
	if !isTerminal(m.Stderr) {
		return nil
	}
	return m.terminalApprover()
}

// terminalApprover asks at the terminal about the calls a rule says a
// person must approve, reading the answer from /dev/tty (not standard
// input, which is the program's). Nil when there is no terminal: such
// calls are then refused, with the reason.
func (m *Main) terminalApprover() codecell.Approver {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	if !isTerminal(tty) {
		tty.Close()
		return nil
	}
	return promptApprover(tty, m.Stderr, func(d time.Time) { _ = tty.SetReadDeadline(d) })
}

// promptApprover asks on out and reads a line from in: y or yes approves,
// anything else refuses (with what was typed after the no as the reason,
// "n too risky"). Prompts come one at a time. setDeadline, when set, bounds
// the read by the request's deadline.
func promptApprover(in io.Reader, out io.Writer, setDeadline func(time.Time)) codecell.Approver {
	var mu sync.Mutex
	r := bufio.NewReader(in)
	return func(ctx context.Context, req codecell.ApprovalRequest) (codecell.Approval, error) {
		mu.Lock()
		defer mu.Unlock()
		args := string(req.Arguments)
		if len(args) > maxPromptArguments {
			args = args[:maxPromptArguments] + "…"
		}
		fmt.Fprintf(out, "%c codecell: the program calls %s with %s (%s).\n%c Allow it? [y/N] ", noteMark, req.Tool, sanitizeLine(args), req.Rule, noteMark)
		if setDeadline != nil {
			if d, ok := ctx.Deadline(); ok {
				setDeadline(d)
			}
		}
		type answer struct {
			line string
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			line, err := r.ReadString('\n')
			got <- answer{line, err}
		}()
		var a answer
		select {
		case a = <-got:
		case <-ctx.Done():
			fmt.Fprintln(out)
			return codecell.Approval{}, ctx.Err()
		}
		if a.err != nil && a.line == "" {
			fmt.Fprintln(out)
			return codecell.Approval{}, fmt.Errorf("reading the answer: %w", a.err)
		}
		word, rest, _ := strings.Cut(strings.TrimSpace(a.line), " ")
		switch strings.ToLower(word) {
		case "y", "yes":
			return codecell.Approval{Approved: true, By: "terminal", Reason: strings.TrimSpace(rest)}, nil
		}
		reason := strings.TrimSpace(rest)
		if reason == "" {
			reason = "refused at the terminal"
		}
		return codecell.Approval{By: "terminal", Reason: reason}, nil
	}
}

// sanitizeLine shows text on one line, its controls escaped: a program's
// arguments must not move the cursor or fake a prompt.
func sanitizeLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// remoteApprover answers a remote execution's approval events at the
// terminal; nil without one.
func (m *Main) remoteApprover() func(context.Context, codecell.ApprovalRequest) api.ApprovalAnswer {
	ask := m.approver()
	if ask == nil {
		return nil
	}
	return func(ctx context.Context, r codecell.ApprovalRequest) api.ApprovalAnswer {
		ctx, cancel := context.WithDeadline(ctx, r.Deadline)
		defer cancel()
		a, err := ask(ctx, r)
		if err != nil {
			return api.ApprovalAnswer{Reason: err.Error()}
		}
		return api.ApprovalAnswer{Approve: a.Approved, Reason: a.Reason}
	}
}
