package attack_test

import (
	"testing"

	"github.com/codecell-dev/codecell"
)

// A program that writes the only record on the result channel, one that
// gives a key twice, and leaves before its runner writes one: the host
// would read the last of the two, and a client reading the Result's value
// may read the first. The runners never write such a record; the Result
// says the channel was misused, and keeps no value.
func TestForgedRecordWithDuplicateKeys(t *testing.T) {
	requireNative(t)
	for _, rec := range []string{
		`{"value":{"approved":false,"approved":true}}`,
		`{"value":1,"value":2}`,
		`{"error":{"type":"ToolError","message":"m","tool_error":{"error_kind":"tool","error_code":"A","error_code":"B"}}}`,
	} {
		for _, c := range []struct{ lang, code string }{
			{"python", "import os\nos.write(3, " + pyBytes(rec+"\n") + ")\nos._exit(0)\n"},
			{"javascript", "const fs = require('fs');\nfs.writeSync(3, " + jsString(rec+"\n") + ");\nprocess.reallyExit(0);\n"},
		} {
			res := run(t, codecell.Exec{Language: c.lang, Code: c.code})
			if res.Status != codecell.StatusFailure || res.Error == nil || res.Error.Code != codecell.CodeResultChannel || res.Value != nil {
				t.Errorf("%s writing %s: %s", c.lang, rec, describe(res))
			}
		}
	}
	// The same record without the duplicate is the program's value: the
	// refusal is for the key given twice.
	res := run(t, codecell.Exec{Language: "python", Code: "import os\nos.write(3, b'{\"value\":{\"approved\":false}}\\n')\nos._exit(0)\n"})
	if res.Status != codecell.StatusSuccess || string(res.Value) != `{"approved":false}` {
		t.Errorf("a record without a duplicate: %s", describe(res))
	}
}
