package tooldoc

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
)

// The schemas below copy the shapes real MCP servers send: the GitHub
// server (Go, properties sorted), the reference servers (zod through
// zod-to-json-schema, draft-07), FastMCP (pydantic v2, 2020-12 with $defs
// and anyOf null), and codecell.Func (jsonschema-go).

const githubSearchIssues = `{
  "type": "object",
  "properties": {
    "order": {"type": "string", "description": "Sort order", "enum": ["asc", "desc"]},
    "owner": {"type": "string", "description": "Optional repository owner. If provided with repo, only issues for this repository are listed."},
    "page": {"type": "number", "description": "Page number for pagination (min 1)", "minimum": 1},
    "perPage": {"type": "number", "description": "Results per page for pagination (min 1, max 100)", "minimum": 1, "maximum": 100},
    "query": {"type": "string", "description": "Search query using GitHub issues search syntax"},
    "repo": {"type": "string", "description": "Optional repository name. If provided with owner, only issues for this repository are listed."},
    "sort": {"type": "string", "description": "Sort field by number of matches of categories, defaults to best match",
      "enum": ["comments", "reactions", "reactions-+1", "reactions--1", "reactions-smile", "reactions-thinking_face", "reactions-heart", "reactions-tada", "interactions", "created", "updated"]}
  },
  "required": ["query"]
}`

const filesystemReadFile = `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"},
    "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"}
  },
  "required": ["path"],
  "additionalProperties": false,
  "$schema": "http://json-schema.org/draft-07/schema#"
}`

const everythingEcho = `{"type":"object","properties":{"message":{"type":"string","description":"Message to echo"}},"required":["message"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

const everythingGetSum = `{"type":"object","properties":{"a":{"type":"number","description":"First number"},"b":{"type":"number","description":"Second number"}},"required":["a","b"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

const everythingStructuredIn = `{"type":"object","properties":{"location":{"type":"string","enum":["New York","Chicago","Los Angeles"],"description":"Choose city"}},"required":["location"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

const everythingStructuredOut = `{"type":"object","properties":{"temperature":{"type":"number","description":"Temperature in celsius"},"conditions":{"type":"string","description":"Weather conditions description"},"humidity":{"type":"number","description":"Humidity percentage"}},"required":["temperature","conditions","humidity"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

// FastMCP (pydantic v2): create_ticket(title, priority: Priority =
// "medium", labels: list[Label] = [], due: datetime | None = None,
// parent_id: int | None = None) -> TicketResult, where Ticket is recursive.
const pydanticCreateTicketIn = `{
  "$defs": {
    "Label": {
      "description": "A label to put on a ticket.",
      "properties": {
        "name": {"title": "Name", "type": "string"},
        "color": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Color"}
      },
      "required": ["name"], "title": "Label", "type": "object"
    },
    "Priority": {"enum": ["low", "medium", "high"], "title": "Priority", "type": "string"}
  },
  "properties": {
    "title": {"description": "Short summary", "title": "Title", "type": "string"},
    "priority": {"$ref": "#/$defs/Priority", "default": "medium"},
    "labels": {"items": {"$ref": "#/$defs/Label"}, "title": "Labels", "type": "array", "default": []},
    "due": {"anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}], "default": null, "description": "When it is due", "title": "Due"},
    "parent_id": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "Parent Id"}
  },
  "required": ["title"],
  "title": "create_ticketArguments",
  "type": "object"
}`

const pydanticCreateTicketOut = `{
  "$defs": {
    "Label": {
      "description": "A label to put on a ticket.",
      "properties": {
        "name": {"title": "Name", "type": "string"},
        "color": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Color"}
      },
      "required": ["name"], "title": "Label", "type": "object"
    },
    "Ticket": {
      "description": "A ticket, with the tickets under it.",
      "properties": {
        "id": {"title": "Id", "type": "integer"},
        "title": {"title": "Title", "type": "string"},
        "labels": {"items": {"$ref": "#/$defs/Label"}, "title": "Labels", "type": "array"},
        "created_at": {"format": "date-time", "title": "Created At", "type": "string"},
        "children": {"items": {"$ref": "#/$defs/Ticket"}, "title": "Children", "type": "array"},
        "parent": {"anyOf": [{"$ref": "#/$defs/Ticket"}, {"type": "null"}], "default": null}
      },
      "required": ["id", "title", "created_at"], "title": "Ticket", "type": "object"
    }
  },
  "properties": {
    "ticket": {"$ref": "#/$defs/Ticket"},
    "url": {"title": "Url", "type": "string", "format": "uri"}
  },
  "required": ["ticket", "url"],
  "title": "TicketResult",
  "type": "object"
}`

// zod-to-json-schema of a strict z.object with enums, a default, a
// nested strict object, a record, and an output that reuses a schema
// through "#/properties/..." (its default $refStrategy).
const zodNotesSearchIn = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "description": "Text to find"},
    "mode": {"type": "string", "enum": ["exact", "fuzzy"], "default": "fuzzy"},
    "filter": {
      "type": "object",
      "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "since": {"type": "string", "format": "date-time"}
      },
      "additionalProperties": false
    },
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}
  },
  "required": ["query"],
  "additionalProperties": false,
  "$schema": "http://json-schema.org/draft-07/schema#"
}`

const zodNotesSearchOut = `{
  "type": "object",
  "properties": {
    "hits": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string"},
          "score": {"type": "number"},
          "kind": {"type": "string", "enum": ["note", "task"]}
        },
        "required": ["id", "score", "kind"],
        "additionalProperties": false
      }
    },
    "best": {"$ref": "#/properties/hits/items"}
  },
  "required": ["hits"],
  "additionalProperties": false,
  "$schema": "http://json-schema.org/draft-07/schema#"
}`

// A Go tool made by codecell.Func: jsonschema-go writes nil-able slices
// as "type": ["null", "array"].
type searchIn struct {
	Query string   `json:"query" jsonschema:"what to search for"`
	Limit int      `json:"limit,omitempty" jsonschema:"at most this many hits"`
	Sites []string `json:"sites,omitempty" jsonschema:"only these sites"`
}

type searchHit struct {
	URL     string    `json:"url"`
	Title   string    `json:"title"`
	Score   float64   `json:"score"`
	Fetched time.Time `json:"fetched"`
}

type searchOut struct {
	Hits  []searchHit `json:"hits"`
	Total int         `json:"total"`
}

func goSearchTool(t *testing.T) codecell.Tool {
	t.Helper()
	tool, err := codecell.Func("search", "Search the web.", func(ctx context.Context, in searchIn) (searchOut, error) {
		return searchOut{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// realisticTools are the tools of the realistic servers, out of order.
func realisticTools(t *testing.T) []codecell.Tool {
	return []codecell.Tool{
		{Name: "notes.search", Description: "Search notes and tasks.", InputSchema: raw(zodNotesSearchIn), OutputSchema: raw(zodNotesSearchOut)},
		{Name: "github.search_issues", Description: "Search for issues in GitHub repositories using issues search syntax already scoped to is:issue", InputSchema: raw(githubSearchIssues)},
		{Name: "everything.echo", Description: "Echoes back the input", InputSchema: raw(everythingEcho)},
		{Name: "everything.get-sum", Description: "Returns the sum of two numbers", InputSchema: raw(everythingGetSum)},
		{Name: "everything.get-structured-content", Description: "Returns structured content along with an output schema for client data validation", InputSchema: raw(everythingStructuredIn), OutputSchema: raw(everythingStructuredOut)},
		{Name: "filesystem.read_file", Description: "Read the complete contents of a file as text.\nUse the 'head' parameter to read only the first N lines of a file, or the 'tail' parameter to read only the last N lines.\nOnly works within allowed directories.", InputSchema: raw(filesystemReadFile)},
		{Name: "tracker.create_ticket", Description: "Create a ticket.", InputSchema: raw(pydanticCreateTicketIn), OutputSchema: raw(pydanticCreateTicketOut)},
		goSearchTool(t),
	}
}

// oddTools stress what names and schemas may hold: keywords, dashes and
// dots, names that collide once made identifiers, global type names, a
// tool and a server of one name, cycles, and every composition keyword.
func oddTools() []codecell.Tool {
	return []codecell.Tool{
		{Name: "class", Description: "A tool named like a keyword. Its text has */ and \"\"\" and a \\ in it,\x00 and a control character.", InputSchema: raw(`{
			"type": "object",
			"properties": {
				"from": {"type": "string", "description": "a keyword in Python"},
				"class": {"type": "integer"},
				"default": {"type": "boolean", "default": true},
				"x-y": {"type": "string", "description": "has a */ comment end"},
				"__private": {"type": "number"},
				"名前": {"type": "string"},
				"": {"type": "string"},
				"a\"b\\c'd": {"type": "string"},
				"new": {"type": "string"},
				"constructor": {"type": "string"},
				"get": {"type": "string"},
				"None": {"type": "string"},
				"print": {"type": "string"}
			},
			"required": ["from", "x-y"]
		}`)},
		{Name: "from.import", Description: "A server and a tool named like keywords.", InputSchema: raw(`{"type":"object","properties":{"as":{"type":"string"}},"required":["as"]}`)},
		{Name: "a.b", InputSchema: raw(`{"type":"object","properties":{"x":{"type":"integer"}}}`)},
		{Name: "a_b", InputSchema: raw(`{"type":"object","properties":{"y":{"type":"integer"}}}`)},
		{Name: "2fa.verify-code", Description: "A server whose name starts with a digit.", InputSchema: raw(`{"type":"object","properties":{"code":{"type":"string","pattern":"^[0-9]{6}$"}},"required":["code"]}`)},
		{Name: "print", Description: "A tool named like a Python builtin.", InputSchema: raw(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{Name: "call_tool", Description: "A tool named like the bridge's own function."},
		{Name: "github", Description: "A tool that shares its name with a server.", InputSchema: raw(`{"type":"object","properties":{},"additionalProperties":false}`)},
		{Name: "github.list", Description: "A tool of the server named github.", InputSchema: raw(`{"type":"object","properties":{"state":{"const":"open"}}}`)},
		{Name: "server.tool.with.dots", InputSchema: raw(`true`), OutputSchema: raw(`{}`)},
		{Name: "no_schema"},
		{Name: "args", Description: "Params that are only a reference, as pydantic writes them.", InputSchema: raw(`{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"x":{"type":"integer","description":"the x"}},"required":["x"]}}}`)},
		{Name: "broken", InputSchema: raw(`{"type": "object", "properties": `)},
		{Name: "shapes", Description: "Every composition keyword.", InputSchema: raw(`{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"$defs": {
				"Error": {"type": "object", "properties": {"code": {"type": "integer"}}, "required": ["code"]},
				"Date": {"type": "string", "format": "date"},
				"None": {"enum": [1, 2.5, true, null, "x\ny\"z"]},
				"list": {"type": "array", "items": {"type": "string"}},
				"Json": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
					{"type": "array", "items": {"$ref": "#/$defs/Json"}},
					{"type": "object", "additionalProperties": {"$ref": "#/$defs/Json"}}]},
				"Loop": {"$ref": "#/$defs/Loop2"},
				"Loop2": {"$ref": "#/$defs/Loop"},
				"SelfUnion": {"anyOf": [{"$ref": "#/$defs/SelfUnion"}, {"type": "string"}]},
				"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
				"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/NodeRef"}, "value": {"type": "integer"}}},
				"NodeRef": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
				"a/b~c": {"type": "string"}
			},
			"type": "object",
			"properties": {
				"nullable": {"type": ["string", "null"]},
				"either": {"type": ["integer", "string"]},
				"openapi": {"type": "string", "nullable": true},
				"const": {"const": "fixed"},
				"weird_enum": {"enum": [{"a": 1}, "b"]},
				"merged": {"allOf": [{"$ref": "#/$defs/Base"}, {"type": "object", "properties": {"extra": {"type": "boolean"}}}]},
				"mixed_all": {"allOf": [{"type": "string"}, {"type": "object"}]},
				"choice": {"oneOf": [
					{"type": "object", "properties": {"kind": {"const": "a"}, "a": {"type": "string"}}, "required": ["kind"]},
					{"type": "object", "properties": {"kind": {"const": "b"}, "b": {"type": "number"}}, "required": ["kind"]}]},
				"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false},
				"old_pair": {"type": "array", "items": [{"type": "string"}, {"type": "boolean"}]},
				"dict_and_props": {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
				"patterns": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
				"anything": {},
				"yes": true,
				"no": false,
				"external": {"$ref": "https://example.com/schema.json"},
				"error": {"$ref": "#/$defs/Error"},
				"date": {"$ref": "#/$defs/Date"},
				"none": {"$ref": "#/$defs/None"},
				"strings": {"$ref": "#/$defs/list"},
				"json": {"$ref": "#/$defs/Json"},
				"json_or_null": {"anyOf": [{"$ref": "#/$defs/Json"}, {"type": "null"}]},
				"loop": {"$ref": "#/$defs/Loop"},
				"self_union": {"$ref": "#/$defs/SelfUnion"},
				"node": {"$ref": "#/$defs/Node"},
				"escaped": {"$ref": "#/$defs/a~1b~0c"},
				"tree": {"type": "array", "items": {"$ref": "#"}},
				"deep": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"type": "string"}}}}}}}
			}
		}`), OutputSchema: raw(`{"type":"array","items":{"$ref":"#/$defs/Error"},"$defs":{"Error":{"type":"object","properties":{"message":{"type":"string"}}}}}`)},
	}
}
