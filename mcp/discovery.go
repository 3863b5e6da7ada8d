package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tooldoc"
)

type toolSummary struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Signature   string `json:"signature"`
}

func summary(t codecell.Tool) toolSummary {
	return toolSummary{Name: t.Name, Description: firstLine(t.Description), Signature: tooldoc.Signature(t)}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func (s *Server) handleSearch(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Searches.Add(1)
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
		// TypeScript asks for the TypeScript declarations of the tools
		// found, as tools_info gives them, beside their signatures.
		TypeScript bool `json:"typescript"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return toolError(`search_tools needs {"query": "words"}`), nil
	}
	if args.Limit <= 0 || args.Limit > 50 {
		args.Limit = 10
	}
	tools, waiting := s.tools(ctx)
	found := Search(tools, args.Query, args.Limit)
	out := struct {
		Tools      []toolSummary `json:"tools"`
		Total      int           `json:"total"`
		TypeScript string        `json:"typescript,omitempty"`
	}{Tools: []toolSummary{}, Total: len(tools)}
	var b strings.Builder
	for _, t := range found {
		out.Tools = append(out.Tools, summary(t))
		fmt.Fprintf(&b, "%s — %s\n  %s\n", t.Name, firstLine(t.Description), tooldoc.Signature(t))
	}
	if len(found) == 0 {
		fmt.Fprintf(&b, "No tool matches %q among %d tools; list_tools lists them all.\n", args.Query, len(tools))
	} else if args.TypeScript {
		out.TypeScript = tooldoc.TypeScript(found)
		b.WriteString("\n" + out.TypeScript)
	}
	for _, st := range waiting {
		fmt.Fprintf(&b, "%s\n", waitingNote(st))
	}
	return s.result(out, strings.TrimRight(b.String(), "\n")), nil
}

// Search ranks tools by how well their names, descriptions and params
// match the query's words: a word in the name counts most, the start of a
// word in the name next, then a param's name, and a word in the
// description or a param's description least. Ties go by name.
func Search(tools []codecell.Tool, query string, limit int) []codecell.Tool {
	terms := words(query)
	type scored struct {
		t     codecell.Tool
		score int
	}
	var hits []scored
	for _, t := range tools {
		name, desc := words(t.Name), words(t.Description)
		params, paramDesc := paramWords(t.InputSchema)
		desc = append(desc, paramDesc...)
		score := 0
		for _, q := range terms {
			for _, w := range name {
				switch {
				case w == q:
					score += 6
				case strings.HasPrefix(w, q) || strings.HasPrefix(q, w) && len(w) >= 3:
					score += 3
				}
			}
			for _, w := range params {
				if w == q || len(q) >= 3 && strings.HasPrefix(w, q) {
					score += 2
				}
			}
			for _, w := range desc {
				if w == q || len(q) >= 4 && strings.HasPrefix(w, q) {
					score++
				}
			}
		}
		if score > 0 {
			hits = append(hits, scored{t, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].t.Name < hits[j].t.Name
	})
	out := make([]codecell.Tool, 0, min(limit, len(hits)))
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].t)
	}
	return out
}

// paramWords returns the words of a tool's params' names, and of their
// descriptions, from its input schema's top-level properties.
func paramWords(schema json.RawMessage) (names, descs []string) {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
			Title       string `json:"title"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil, nil
	}
	for k, p := range s.Properties {
		names = append(names, words(k)...)
		descs = append(descs, words(p.Description)...)
		descs = append(descs, words(p.Title)...)
	}
	return names, descs
}

// words splits text into lowercase words, at anything that is not a letter
// or a digit, and at camelCase boundaries.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 1 {
			out = append(out, strings.ToLower(string(cur)))
		}
		cur = cur[:0]
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

func (s *Server) handleList(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Discovery.Add(1)
	var args struct {
		Server string `json:"server"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &args)
	tools, waiting := s.tools(ctx)
	out := struct {
		Tools       []toolSummary `json:"tools"`
		Unavailable []string      `json:"unavailable,omitempty"`
	}{Tools: []toolSummary{}}
	var b strings.Builder
	for _, t := range tools {
		if args.Server != "" && !strings.HasPrefix(t.Name, args.Server+".") {
			continue
		}
		out.Tools = append(out.Tools, summary(t))
		fmt.Fprintf(&b, "%s — %s\n", t.Name, tooldoc.Summary(t.Description, summaryChars))
	}
	for _, st := range waiting {
		if args.Server != "" && st.Name != args.Server {
			continue
		}
		note := waitingNote(st)
		out.Unavailable = append(out.Unavailable, strings.TrimSuffix(strings.TrimPrefix(note, "("), ")"))
		fmt.Fprintf(&b, "%s\n", note)
	}
	if len(out.Tools) == 0 {
		b.WriteString("No tools.")
	}
	return s.result(out, strings.TrimRight(b.String(), "\n")), nil
}

type toolInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	TypeScript   string          `json:"typescript,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Error        string          `json:"error,omitempty"`
}

func (s *Server) handleInfo(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Discovery.Add(1)
	var args struct {
		Names []string `json:"names"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || len(args.Names) == 0 {
		return toolError(`tools_info needs {"names": ["server.tool", ...]}`), nil
	}
	tools, waiting := s.tools(ctx)
	byName := map[string]codecell.Tool{}
	var names []string
	for _, t := range tools {
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	out := struct {
		Tools []toolInfo `json:"tools"`
	}{}
	var b strings.Builder
	for _, n := range args.Names {
		t, ok := byName[n]
		if !ok {
			msg := notFound(n, names, waiting)
			out.Tools = append(out.Tools, toolInfo{Name: n, Error: msg})
			fmt.Fprintf(&b, "%s\n\n", msg)
			continue
		}
		ts := tooldoc.TypeScript([]codecell.Tool{t})
		out.Tools = append(out.Tools, toolInfo{Name: t.Name, Description: t.Description, Signature: tooldoc.Signature(t),
			TypeScript: ts, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema})
		fmt.Fprintf(&b, "%s\n%s\n", t.Name, ts)
	}
	return s.result(out, strings.TrimRight(b.String(), "\n")), nil
}

func (s *Server) handleRequiredKeys(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s.Stats.Discovery.Add(1)
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Name == "" {
		return toolError(`get_required_keys_for_tool needs {"name": "server.tool"}`), nil
	}
	tools, waiting := s.tools(ctx)
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
		if t.Name != args.Name {
			continue
		}
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(t.InputSchema, &schema)
		out := struct {
			Name     string   `json:"name"`
			Required []string `json:"required"`
			Optional []string `json:"optional"`
		}{Name: t.Name, Required: []string{}, Optional: []string{}}
		required := map[string]bool{}
		for _, k := range schema.Required {
			required[k] = true
			out.Required = append(out.Required, k)
		}
		for k := range schema.Properties {
			if !required[k] {
				out.Optional = append(out.Optional, k)
			}
		}
		sort.Strings(out.Optional)
		text := fmt.Sprintf("%s requires: %s; may have: %s", t.Name, orNone(out.Required), orNone(out.Optional))
		return s.result(out, text), nil
	}
	return toolError(notFound(args.Name, names, waiting)), nil
}

// notFound says that no ready tool has the name: a near name, or that the
// server it names is not ready.
func notFound(name string, names []string, waiting []codecell.SourceStatus) string {
	server, _, _ := strings.Cut(name, ".")
	for _, st := range waiting {
		if st.Name == server {
			return fmt.Sprintf("%s is not known yet: %s", name, strings.TrimSuffix(strings.TrimPrefix(waitingNote(st), "("), ")"))
		}
	}
	msg := fmt.Sprintf("no tool named %q", name)
	if near := codecell.Suggest(name, names); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return msg
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "nothing"
	}
	return strings.Join(keys, ", ")
}

// toolError is a discovery tool's failure: a message for the model.
func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, IsError: true}
}

func ptr[T any](v T) *T { return &v }
