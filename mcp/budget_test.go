package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/tooldoc"
)

// staticSource is an upstream server whose tools are a list.
type staticSource struct {
	name  string
	tools []codecell.Tool
}

func (s staticSource) Name() string { return s.name }
func (s staticSource) Tools(context.Context) ([]codecell.Tool, error) {
	return append([]codecell.Tool(nil), s.tools...), nil
}

var (
	budgetVerbs = []string{"get", "list", "create", "update", "delete", "search", "archive", "restore", "export", "import",
		"assign", "approve", "reject", "merge", "sync", "count", "validate", "publish", "schedule", "tag"}
	budgetNouns = []string{"invoice", "customer", "ticket", "order", "project", "issue", "comment", "user", "team", "repository",
		"deployment", "alert", "dashboard", "report", "contract", "payment", "shipment", "product", "campaign", "lead",
		"document", "folder", "meeting", "webhook", "secret"}
)

// manyTools are n tools (at most 500) with distinct verb_noun names, a
// description of two sentences and a few documented params each, as an
// upstream server's own names (without a server's prefix).
func manyTools(n int) []codecell.Tool {
	var out []codecell.Tool
	for i := 0; i < n; i++ {
		verb, noun := budgetVerbs[i%len(budgetVerbs)], budgetNouns[i/len(budgetVerbs)]
		out = append(out, codecell.Tool{
			Name:        verb + "_" + noun,
			Description: fmt.Sprintf("Runs %s on one %s of the workspace. Needs the %s scope, and says what changed.", verb, noun, noun),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"id":{"type":"string","description":"the %s's ID"},"limit":{"type":"integer","minimum":1,"maximum":100},"mode":{"type":"string","enum":["fast","full"]}},"required":["id"]}`, noun)),
		})
	}
	return out
}

// prefixed is tools as a server named server lists them.
func prefixed(server string, tools []codecell.Tool) []codecell.Tool {
	out := make([]codecell.Tool, len(tools))
	for i, t := range tools {
		t.Name = server + "." + t.Name
		out[i] = t
	}
	return out
}

// execute's description keeps to the budget whenever the tools' declarations
// do not fit it, whatever the number of tools and servers and of servers not
// ready; the declarations are in it whenever they fit, and a shorter listing
// always points to search_tools and tools_info.
func TestExecuteDescriptionKeepsToBudget(t *testing.T) {
	s := &Server{Engine: &codecell.Engine{Tier: "local"}}
	rules := utf8.RuneCountInString(s.rules("python"))
	failed := []codecell.SourceStatus{
		{Name: "down", State: codecell.SourceFailed, Err: errors.New(strings.Repeat("the server wrote a long complaint ", 30))},
		{Name: "slow", State: codecell.SourceStarting},
	}
	seen := map[string]bool{}
	for _, n := range []int{1, 5, 14, 40, 120, 500} {
		for _, servers := range []int{1, 3, 60} {
			var tools []codecell.Tool
			all := manyTools(n)
			for i, tool := range all {
				tool.Name = fmt.Sprintf("s%02d.%s", i%servers, tool.Name)
				tools = append(tools, tool)
			}
			for _, waiting := range [][]codecell.SourceStatus{nil, failed} {
				for _, budget := range []int{500, 1000, 2000, 4000, 20000} {
					room := budget*4 - rules
					desc := s.rules("python") + toolsSection(tools, waiting, room)
					got := listingOf(desc)
					seen[got] = true
					name := fmt.Sprintf("%d tools on %d servers, %d not ready, budget %d", n, servers, len(waiting), budget)
					declarations := utf8.RuneCountInString(headDeclarations + tooldoc.TypeScript(tools))
					if got == "declarations" {
						continue
					}
					if declarations <= room && len(waiting) == 0 {
						t.Errorf("%s: the declarations (%d characters) fit the room (%d), yet the listing is %s", name, declarations, room, got)
					}
					if EstimateTokens(desc) > budget {
						t.Errorf("%s: the description is %d tokens (%d characters), over the budget:\n%s", name, EstimateTokens(desc), utf8.RuneCountInString(desc), desc)
					}
					for _, want := range []string{"search_tools", "tools_info"} {
						if !strings.Contains(desc, want) {
							t.Errorf("%s: the %s listing does not point to %s:\n%s", name, got, want, desc)
						}
					}
					if got == "server counts" {
						listed := 0
						for _, line := range strings.Split(desc, "\n") {
							var server string
							var k int
							if _, err := fmt.Sscanf(line, "%s %d tool", &server, &k); err == nil && strings.HasSuffix(server, ":") {
								listed += k
							}
						}
						if listed != n && !strings.Contains(desc, "more (list_tools lists them)") {
							t.Errorf("%s: the servers listed hold %d tools of %d, and nothing says more are left out:\n%s", name, listed, n, desc)
						}
					}
				}
			}
		}
	}
	for _, want := range []string{"declarations", "signatures", "names", "server counts"} {
		if !seen[want] {
			t.Errorf("no case gave the %s listing", want)
		}
	}
}

// listingOf names the listing in an execute description.
func listingOf(desc string) string {
	switch {
	case strings.Contains(desc, headDeclarations):
		return "declarations"
	case strings.Contains(desc, headSignatures):
		return "signatures"
	case strings.Contains(desc, headNames):
		return "names"
	default:
		return "server counts"
	}
}

// With 500 tools on two servers, execute's description keeps to the default
// budget and neither it nor call_tool_chain's carries declarations; every
// tool is still found by search_tools (first, by the words of its name),
// and tools_info gives its TypeScript declaration.
func TestEveryToolStaysDiscoverable(t *testing.T) {
	box := &codecell.Toolbox{}
	tools := manyTools(500)
	for _, src := range []staticSource{{"crm", tools[:250]}, {"ops", tools[250:]}} {
		if err := box.AddSource(src); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}}
	cs := connectInProcess(t, s)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if strings.Contains(tool.Description, "declare const tools") || strings.Contains(tool.Description, "Promise<") {
			t.Errorf("%s's description carries declarations:\n%s", tool.Name, tool.Description)
		}
		if tool.Name == "execute" && EstimateTokens(tool.Description) > DefaultPromptBudgetTokens {
			t.Errorf("execute's description is %d tokens, over the default budget of %d", EstimateTokens(tool.Description), DefaultPromptBudgetTokens)
		}
	}
	all := append(prefixed("crm", tools[:250]), prefixed("ops", tools[250:])...)
	var batch []string
	for i, tool := range all {
		query := strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(tool.Name, "crm."), "ops."), "_", " ")
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": query, "limit": 3}})
		if err != nil {
			t.Fatal(err)
		}
		var found struct {
			Tools []toolSummary `json:"tools"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &found); err != nil || len(found.Tools) == 0 || found.Tools[0].Name != tool.Name {
			t.Errorf("search_tools %q did not find %s first: %s", query, tool.Name, raw)
		}
		batch = append(batch, tool.Name)
		if len(batch) < 50 && i < len(all)-1 {
			continue
		}
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "tools_info", Arguments: map[string]any{"names": batch}})
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Tools []toolInfo `json:"tools"`
		}
		raw, _ = json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &info); err != nil || len(info.Tools) != len(batch) {
			t.Fatalf("tools_info %v: %s", batch, raw)
		}
		for j, ti := range info.Tools {
			_, short, _ := strings.Cut(batch[j], ".")
			if ti.Name != batch[j] || ti.Error != "" || !strings.Contains(ti.TypeScript, short+"(params: ") || !strings.Contains(ti.TypeScript, "id: string") {
				t.Errorf("tools_info %s: %+v", batch[j], ti)
			}
		}
		batch = nil
	}

	// A search may bring the declarations of what it finds.
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "approve invoice", "limit": 1, "typescript": true}})
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(res); !strings.Contains(text, "approve_invoice(params: ") || !strings.Contains(text, "interface CrmApproveInvoiceParams") {
		t.Errorf("search_tools with typescript:\n%s", text)
	}
}

// The budget is the Server's: the default brings the declarations of a
// few tools and shorter listings of more, a larger one brings more
// declarations, and no budget those of 500 tools.
func TestPromptBudgetSetting(t *testing.T) {
	for _, c := range []struct {
		tools, budget int
		want          string
	}{
		{14, 0, "declarations"},
		{40, 0, "signatures"},
		{40, 20000, "declarations"},
		{100, 0, "names"},
		{500, 0, "server counts"},
		{500, -1, "declarations"},
	} {
		box := &codecell.Toolbox{}
		if err := box.AddSource(staticSource{"s", manyTools(c.tools)}); err != nil {
			t.Fatal(err)
		}
		s := &Server{Engine: &codecell.Engine{Tier: "local", Tools: box}, PromptBudgetTokens: c.budget}
		desc := executeDescriptionOf(t, connectInProcess(t, s))
		if got := listingOf(desc); got != c.want {
			t.Errorf("%d tools, budget %d: the listing is %s, want %s:\n%s", c.tools, c.budget, got, c.want, desc)
		}
		budget := c.budget
		if budget == 0 {
			budget = DefaultPromptBudgetTokens
		}
		if budget > 0 && EstimateTokens(desc) > budget {
			t.Errorf("%d tools, budget %d: the description is %d tokens", c.tools, c.budget, EstimateTokens(desc))
		}
	}
}

// Whatever upstream servers call and describe their tools, execute's
// description keeps to a budget the rules leave room in, unless it carries
// the declarations, which it does only when they fit.
func FuzzToolsSection(f *testing.F) {
	f.Add("Echoes back the input string", `{"type":"object","properties":{"message":{"type":"string"}}}`, uint16(14), uint8(1), uint16(2000), false)
	f.Add("Lists things.\nIn pages. e.g. this. ¿Qué? "+strings.Repeat("long ", 200), `{"type":"object","properties":{"a":{"enum":[1,"x",null]}}}`, uint16(500), uint8(60), uint16(500), true)
	f.Add("", `{"$ref":"#/$defs/x","$defs":{"x":{"$ref":"#/$defs/x"}}}`, uint16(3), uint8(3), uint16(800), true)
	f.Add("日本語の説明。次の文。", `not json`, uint16(200), uint8(7), uint16(1000), false)
	s := &Server{Engine: &codecell.Engine{Tier: "local"}}
	rules := s.rules("python")
	f.Fuzz(func(t *testing.T, desc, schema string, n uint16, servers uint8, budget uint16, failing bool) {
		n, servers = n%600+1, servers%80+1
		budget = budget%5000 + 500
		var tools []codecell.Tool
		for i := 0; i < int(n); i++ {
			tools = append(tools, codecell.Tool{
				Name:        fmt.Sprintf("s%d.t%d", i%int(servers), i),
				Description: desc,
				InputSchema: json.RawMessage(schema),
			})
		}
		var waiting []codecell.SourceStatus
		if failing {
			waiting = []codecell.SourceStatus{{Name: "down", State: codecell.SourceFailed, Err: errors.New(desc)}}
		}
		room := int(budget)*4 - utf8.RuneCountInString(rules)
		out := rules + toolsSection(tools, waiting, room)
		if !utf8.ValidString(out) && utf8.ValidString(desc) {
			t.Fatalf("the description is not valid UTF-8")
		}
		if listingOf(out) != "declarations" && EstimateTokens(out) > int(budget) {
			t.Fatalf("%d tools on %d servers: %d tokens, over the budget of %d:\n%s", n, servers, EstimateTokens(out), budget, out)
		}
	})
}
