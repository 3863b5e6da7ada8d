package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// The terminal's prompt: y approves, n with words refuses with them as the
// reason, and a request whose deadline passes gets no answer; the
// arguments are shown on one line, their controls escaped.
func TestPromptApprover(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ask := promptApprover(inR, outW, nil)
	prompts := make(chan string, 4)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := outR.Read(buf)
			if err != nil {
				return
			}
			prompts <- string(buf[:n])
		}
	}()
	req := codecell.ApprovalRequest{ID: "a1", Tool: "deploy", Arguments: []byte("{\"env\":\"prod\x1b[2J\"}"), Rule: "config: ask deploy"}
	type result struct {
		a   codecell.Approval
		err error
	}
	answer := func(line string) result {
		done := make(chan result, 1)
		go func() {
			a, err := ask(context.Background(), req)
			done <- result{a, err}
		}()
		p := <-prompts
		if !strings.Contains(p, "deploy") || !strings.Contains(p, `\u001b[2J`) || strings.Contains(p, "\x1b") || !strings.Contains(p, "[y/N]") {
			t.Errorf("prompt %q", p)
		}
		io.WriteString(inW, line)
		return <-done
	}
	if r := answer("y\n"); r.err != nil || !r.a.Approved || r.a.By != "terminal" {
		t.Errorf("y: %+v", r)
	}
	if r := answer("n not on fridays\n"); r.err != nil || r.a.Approved || r.a.Reason != "not on fridays" {
		t.Errorf("n: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	go func() { <-prompts }()
	if _, err := ask(ctx, req); err == nil {
		t.Error("no answer, yet no error")
	}
}
