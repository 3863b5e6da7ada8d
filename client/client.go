// Package client is a Go client of codecell's HTTP service (codecell
// serve): sessions, files and executions.
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("CODECELL_TOKEN"))
//	ses, err := c.CreateSession(ctx, api.SessionSpec{})
//	_, err = c.Upload(ctx, ses.ID, "data.csv", strings.NewReader("a,b\n1,2\n"))
//	res, err := c.Execute(ctx, ses.ID, api.Execution{Language: "python", Code: "open('data.csv').read()"})
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/api"
)

// Client talks to one codecell service.
type Client struct {
	// BaseURL is the service's address, such as http://127.0.0.1:8080.
	BaseURL string
	// Token is sent as "Authorization: Bearer TOKEN" when not empty.
	Token string
	// HTTP sends the requests; nil means a client without a timeout (an
	// execution takes as long as its own timeout).
	HTTP *http.Client
	// Approve, when set, answers the tool calls of a streamed execution
	// that a rule says a person must approve (Stream's approval events);
	// it may take its time, as a person does. Unset, such calls wait
	// until their deadline and are refused.
	Approve func(ctx context.Context, r codecell.ApprovalRequest) api.ApprovalAnswer
}

// AnswerApproval answers a call of a streamed execution that waits for a
// person's approval.
func (c *Client) AnswerApproval(ctx context.Context, execID, id string, a api.ApprovalAnswer) error {
	return c.doJSON(ctx, "POST", "/v1/executions/"+url.PathEscape(execID)+"/approvals/"+url.PathEscape(id), a, nil)
}

// New returns a client of the service at baseURL.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token}
}

// Error is a request the service refused or failed: its HTTP status and
// the envelope it sent.
type Error struct {
	Status int
	// RetryAfter is the service's Retry-After, when it sent one (429, 409).
	RetryAfter time.Duration
	Envelope   *codecell.Envelope
}

func (e *Error) Error() string {
	if e.Envelope != nil {
		return fmt.Sprintf("codecell service: %d %s: %s", e.Status, e.Envelope.Code, e.Envelope.Message)
	}
	return fmt.Sprintf("codecell service: %d %s", e.Status, http.StatusText(e.Status))
}

// Code is the envelope's error code, "" when there is none.
func (e *Error) Code() string {
	if e.Envelope == nil {
		return ""
	}
	return e.Envelope.Code
}

// CodeOf is the envelope's error code of an *Error, and "" for any other
// error.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return ""
}

// StatusOf is the HTTP status of an *Error, and 0 for any other error.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// CreateSession makes a session.
func (c *Client) CreateSession(ctx context.Context, spec api.SessionSpec) (*api.Session, error) {
	var out api.Session
	return &out, c.doJSON(ctx, "POST", "/v1/sessions", spec, &out)
}

// Session reads a session.
func (c *Client) Session(ctx context.Context, id string) (*api.Session, error) {
	var out api.Session
	return &out, c.doJSON(ctx, "GET", "/v1/sessions/"+url.PathEscape(id), nil, &out)
}

// Sessions lists the sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var out api.SessionList
	return out.Sessions, c.doJSON(ctx, "GET", "/v1/sessions", nil, &out)
}

// DeleteSession ends a session and removes its workspace.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.doJSON(ctx, "DELETE", "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// RestartSession starts a live session's interpreters afresh.
func (c *Client) RestartSession(ctx context.Context, id string) (*api.Session, error) {
	var out api.Session
	return &out, c.doJSON(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/restart", nil, &out)
}

// ForkSession makes a session that starts where session id stands: a copy
// of its workspace and, for a live session, of its Python interpreter's
// state; the answer says what was copied.
func (c *Client) ForkSession(ctx context.Context, id string) (*api.ForkedSession, error) {
	var out api.ForkedSession
	return &out, c.doJSON(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/fork", nil, &out)
}

// Variables lists the names a live session's interpreter of language
// holds ("" for python).
func (c *Client) Variables(ctx context.Context, id, language string) ([]codecell.Variable, error) {
	var out api.Variables
	q := ""
	if language != "" {
		q = "?language=" + url.QueryEscape(language)
	}
	return out.Variables, c.doJSON(ctx, "GET", "/v1/sessions/"+url.PathEscape(id)+"/variables"+q, nil, &out)
}

// Upload writes one file into a session's workspace, at a path relative to
// it.
func (c *Client) Upload(ctx context.Context, id, path string, content io.Reader) (*api.File, error) {
	resp, err := c.do(ctx, "PUT", filesPath(id, path), content, "application/octet-stream", "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.File
	return &out, json.NewDecoder(resp.Body).Decode(&out)
}

// UploadArchive unpacks a tar (or a gzip-compressed tar) into a directory
// of the workspace; "" is the workspace itself.
func (c *Client) UploadArchive(ctx context.Context, id, dir string, tar io.Reader) (*api.ArchiveResult, error) {
	p := "/v1/sessions/" + url.PathEscape(id) + "/files"
	if dir != "" {
		p += "?path=" + url.QueryEscape(dir)
	}
	resp, err := c.do(ctx, "POST", p, tar, "application/x-tar", "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.ArchiveResult
	return &out, json.NewDecoder(resp.Body).Decode(&out)
}

// Download reads a file of the workspace; a directory comes as a tar
// ("" is the whole workspace). Close the reader.
func (c *Client) Download(ctx context.Context, id, path string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, "GET", filesPath(id, path), nil, "", "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Remove removes a file, a symbolic link (not what it points to) or a
// directory of the workspace; a directory that is not empty only when
// recursive.
func (c *Client) Remove(ctx context.Context, id, path string, recursive bool) error {
	p := filesPath(id, path)
	if recursive {
		p += "?recursive=true"
	}
	return c.doJSON(ctx, "DELETE", p, nil, nil)
}

// Files lists a directory of the workspace and everything under it; "" is
// the workspace.
func (c *Client) Files(ctx context.Context, id, dir string) ([]api.File, error) {
	p := "/v1/sessions/" + url.PathEscape(id) + "/files"
	if dir != "" {
		p += "?path=" + url.QueryEscape(dir)
	}
	var out api.FileList
	return out.Files, c.doJSON(ctx, "GET", p, nil, &out)
}

func filesPath(id, path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/v1/sessions/" + url.PathEscape(id) + "/files/" + strings.Join(parts, "/")
}

// Execute runs a program, in a session's workspace when session is not
// empty, in a fresh one otherwise, and returns its Result. A program that
// failed is a Result with its status, not an error.
func (c *Client) Execute(ctx context.Context, session string, x api.Execution) (*codecell.Result, error) {
	var out codecell.Result
	return &out, c.doJSON(ctx, "POST", execPath(session), x, &out)
}

// Stream runs a program as Execute does, and calls output with its stdout
// and stderr ("stdout" or "stderr", and the text) as the program writes
// them.
func (c *Client) Stream(ctx context.Context, session string, x api.Execution, output func(stream, text string)) (*codecell.Result, error) {
	body, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, "POST", execPath(session), bytes.NewReader(body), "application/json", "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		var out codecell.Result
		return &out, json.NewDecoder(resp.Body).Decode(&out)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	var event string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == api.EventApproval && c.Approve != nil {
				var r codecell.ApprovalRequest
				if err := json.Unmarshal(data.Bytes(), &r); err != nil {
					return nil, fmt.Errorf("codecell service: an approval event: %w", err)
				}
				// Answered aside: the stream is read on meanwhile.
				go func() {
					_ = c.AnswerApproval(ctx, r.ExecID, r.ID, c.Approve(ctx, r))
				}()
			} else if event != "" || data.Len() > 0 {
				res, done, err := handleEvent(event, data.Bytes(), output)
				if done || err != nil {
					return res, err
				}
			}
			event = ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
			// a comment: the keep-alive
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("codecell service: the event stream ended before the result")
}

func handleEvent(event string, data []byte, output func(stream, text string)) (*codecell.Result, bool, error) {
	switch event {
	case api.EventStdout, api.EventStderr:
		var o api.Output
		if err := json.Unmarshal(data, &o); err != nil {
			return nil, true, fmt.Errorf("codecell service: a %s event: %w", event, err)
		}
		if output != nil {
			output(event, o.Text)
		}
		return nil, false, nil
	case api.EventResult:
		var res codecell.Result
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, true, fmt.Errorf("codecell service: the result event: %w", err)
		}
		return &res, true, nil
	case api.EventError:
		var env codecell.Envelope
		if err := json.Unmarshal(data, &env); err != nil {
			return nil, true, fmt.Errorf("codecell service: the error event: %w", err)
		}
		return nil, true, &Error{Status: http.StatusOK, Envelope: &env}
	}
	return nil, false, nil // an event of a later version
}

func execPath(session string) string {
	if session == "" {
		return "/v1/executions"
	}
	return "/v1/sessions/" + url.PathEscape(session) + "/executions"
}

// Health reads /healthz.
func (c *Client) Health(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	return out, c.doJSON(ctx, "GET", "/healthz", nil, &out)
}

func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, body, ct, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("codecell service: reading the answer to %s %s: %w", method, path, err)
	}
	return nil
}

// do sends a request and returns a response of status 2xx, or an *Error.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	var env codecell.Envelope
	if b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20)); json.Unmarshal(b, &env) == nil && env.Code != "" {
		e.Envelope = &env
	}
	return nil, e
}
