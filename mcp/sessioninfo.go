package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	csession "github.com/codecell-dev/codecell/session"
)

// sessionInfo is what session_info says of a session.
type sessionInfo struct {
	Session      string                         `json:"session"`
	State        string                         `json:"state"`
	Executions   int                            `json:"executions"`
	Running      bool                           `json:"running"`
	Interpreters []codecell.LiveStatus          `json:"interpreters,omitempty"`
	Variables    map[string][]codecell.Variable `json:"variables,omitempty"`
	Unavailable  map[string]string              `json:"unavailable,omitempty"`
}

// liveRuntimes are the languages whose interpreters a live session keeps,
// one for each runtime.
var liveRuntimes = map[string]string{"python": "python", "node": "javascript"}

// handleSessionInfo answers session_info: the caller's session of that
// name, never made by asking.
func (s *Server) handleSessionInfo(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var args struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Session == "" {
		return toolError(`session_info takes {"session": "NAME"}, the name given to execute`), nil
	}
	ses, err := s.Sessions.Lookup(principalOf(req), args.Session)
	if errors.Is(err, csession.ErrNotFound) {
		return toolError(fmt.Sprintf("no session %q: execute with \"session\": %q makes it (and \"live\": true keeps its variables)", args.Session, args.Session)), nil
	}
	if err != nil {
		return toolError(err.Error()), nil
	}
	st := ses.Info()
	info := sessionInfo{Session: args.Session, State: ses.State(), Executions: st.Executions, Running: st.Running}
	var b strings.Builder
	fmt.Fprintf(&b, "session %s: %s, %d executions", args.Session, info.State, info.Executions)
	if info.Running {
		b.WriteString(", one running now")
	}
	b.WriteByte('\n')
	if ses.Live != nil {
		info.Interpreters = ses.Live.Status()
		for _, in := range info.Interpreters {
			lang := liveRuntimes[in.Language]
			state := "ended (the next execution starts a fresh one)"
			if in.Running {
				state = fmt.Sprintf("running, %d executions, %.1f MiB", in.Cells, float64(in.Memory)/(1<<20))
			}
			fmt.Fprintf(&b, "%s interpreter: %s\n", in.Language, state)
			if !in.Running || lang == "" {
				continue
			}
			vars, err := ses.Live.Variables(ctx, lang)
			if err != nil {
				if info.Unavailable == nil {
					info.Unavailable = map[string]string{}
				}
				info.Unavailable[in.Language] = err.Error()
				fmt.Fprintf(&b, "  variables: not listed (%v)\n", err)
				continue
			}
			if info.Variables == nil {
				info.Variables = map[string][]codecell.Variable{}
			}
			info.Variables[in.Language] = vars
			for _, v := range vars {
				fmt.Fprintf(&b, "  %s: %s = %s\n", v.Name, v.Type, v.Repr)
			}
		}
		if len(info.Interpreters) == 0 {
			b.WriteString("no interpreter yet: the first execution starts one\n")
		}
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.TrimRight(b.String(), "\n")}}, StructuredContent: info}, nil
}
