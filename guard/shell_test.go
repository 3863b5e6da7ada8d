package guard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckShell(t *testing.T) {
	all := &Policy{Block: Categories}
	only := func(categories ...string) *Policy { return &Policy{Block: categories} }
	cmds := func(patterns ...string) *Policy { return &Policy{AllowedCommands: patterns} }
	listed := cmds("ls", "git status*", "grep *")

	tests := []struct {
		name   string
		code   string
		posix  bool
		policy *Policy
		want   []string // rule@line:col
	}{
		// Command names, however they are spelled.
		{"plain", "curl https://example.com", false, all, []string{"network.curl@1:1"}},
		{"quoted parts", `c"u"rl x`, false, all, []string{"network.curl@1:1"}},
		{"single quoted", `'curl' x`, false, all, []string{"network.curl@1:1"}},
		{"backslash", `\curl x`, false, all, []string{"network.curl@1:1"}},
		{"ansi-c string", `$'\x63url' x`, false, all, []string{"network.curl@1:1"}},
		{"path", "/usr/bin/curl x", false, all, []string{"network.curl@1:1"}},
		{"computed directory", `"$d/curl" x`, false, all, []string{"network.curl@1:1"}},
		{"brace expansion name", "{cu,}rl x", false, all, []string{"dynamic_eval.computed_command@1:1"}},
		{"glob name", "/usr/bin/cur? x", false, all, []string{"dynamic_eval.computed_command@1:1"}},
		{"variable name", "$cmd args", false, all, []string{"dynamic_eval.computed_command@1:1"}},
		{"substituted name", `"$(echo rm)" -rf x`, false, all, []string{"dynamic_eval.computed_command@1:1"}},
		{"braced variable name", "${X}", false, all, []string{"dynamic_eval.computed_command@1:1"}},
		{"computed name allowed without dynamic_eval", "$cmd args", false, only(Network), nil},

		// Wherever commands stand.
		{"substitution in an argument", `echo "$(curl x)"`, false, all, []string{"network.curl@1:9"}},
		{"backticks", "echo `wget y`", false, all, []string{"network.wget@1:7"}},
		{"nested backticks", "echo `echo \\`curl x\\``", false, all, []string{"network.curl@1:14"}},
		{"line continuation in a name", "c\\\nurl x", false, all, []string{"network.curl@1:1"}},
		{"octal ansi-c string", `$'\143url' x`, false, all, []string{"network.curl@1:1"}},
		{"NUL ends an ansi-c string", `echo $'\x00curl'`, false, all, nil},
		{"names in strings and comments", "echo \"curl is cool\"; grep curl file # wget x", false, all, nil},
		{"redirect of a compound command", "{ echo; } > out", false, all, []string{"filesystem.redirect@1:11"}},
		{"substitution and redirect", "cat <(curl x) > out", false, all, []string{"network.curl@1:7", "filesystem.redirect@1:15"}},
		{"lists", "ls && rm y || mv a b", false, all, []string{"filesystem.rm@1:7", "filesystem.mv@1:15"}},
		{"assignment only", "x=$(wget y)", false, all, []string{"network.wget@1:5"}},
		{"function body", "f() {\n  curl x\n}\nf", false, all, []string{"network.curl@2:3"}},
		{"loop and if", "for i in 1 2; do\n  if true; then ping -c1 h; fi\ndone", false, all, []string{"network.ping@2:17"}},
		{"case", "case $x in a) nc h 1;; esac", false, all, []string{"low_level_network.nc@1:15"}},
		{"process substitutions", "diff <(curl a) <(wget b)", false, all, []string{"network.curl@1:8", "network.wget@1:18"}},
		{"arithmetic", "echo $(( $(curl x) + 1 ))", false, all, []string{"network.curl@1:12"}},
		{"parameter expansion", "echo ${x:-$(rm y)}", false, all, []string{"filesystem.rm@1:13"}},
		{"test clause", "[[ $(curl x) == y ]]", false, all, []string{"network.curl@1:6"}},
		{"heredoc substitution", "cat <<EOF\n$(rm x)\nEOF\n", false, all, []string{"filesystem.rm@2:3"}},
		{"quoted heredoc", "cat <<'EOF'\n$(rm x)\nEOF\n", false, all, nil},
		{"subshell and block", "( cd /; { mv a b; } )", false, all, []string{"filesystem.mv@1:11"}},

		// Wrappers.
		{"env nice", "env A=1 nice -n 5 curl x", false, all, []string{"network.curl@1:19"}},
		{"find exec", `find . -exec rm {} \;`, false, all, []string{"filesystem.rm@1:14"}},
		{"find delete", "find . -name '*.tmp' -delete", false, all, []string{"filesystem.find@1:1"}},
		{"xargs", "ls | xargs rm", false, all, []string{"filesystem.rm@1:12"}},
		{"sudo", "sudo -u root rm -rf /", false, all, []string{"filesystem.rm@1:14"}},
		{"timeout", "timeout -s KILL 5 wget x", false, all, []string{"network.wget@1:19"}},
		{"command", "command curl x", false, all, []string{"network.curl@1:9"}},
		{"command -v runs nothing", "command -v curl", false, all, nil},
		{"exec", "exec curl x", false, all, []string{"process.exec@1:1", "network.curl@1:6"}},
		{"nohup", "nohup curl x &", false, all, []string{"process.nohup@1:1", "network.curl@1:7"}},
		{"busybox", "busybox wget x", false, all, []string{"network.wget@1:9"}},
		{"time in sh", "time curl x", true, all, []string{"network.curl@1:6"}},
		{"time in bash", "time curl x", false, all, []string{"network.curl@1:6"}},
		{"command -p", "command -p curl x", false, all, []string{"network.curl@1:12"}},
		{"setsid", "setsid curl x", false, all, []string{"process.setsid@1:1", "network.curl@1:8"}},
		{"sudo env", "sudo -E env PATH=x curl y", false, all, []string{"network.curl@1:20"}},
		{"stdbuf", "stdbuf -oL curl x", false, all, []string{"network.curl@1:12"}},
		{"chroot", "chroot / curl x", false, all, []string{"network.curl@1:10"}},
		{"coproc", "coproc curl x", false, all, []string{"network.curl@1:8"}},
		{"declare", "declare x=$(curl y)", false, all, []string{"network.curl@1:13"}},

		// Code in strings.
		{"bash -c", "bash -c 'curl x'", false, all, []string{"network.curl@1:9"}},
		{"bash -lc", "bash -lc 'rm -rf x'", false, all, []string{"filesystem.rm@1:10"}},
		{"nested -c", `bash -c "sh -c 'curl x'"`, false, all, []string{"network.curl@1:9"}},
		{"-c repeats reported once", "bash -c 'curl a; curl b'", false, all, []string{"network.curl@1:9"}},
		{"sh -c computed", `sh -c "$X"`, false, all, []string{"dynamic_eval.shell_c@1:7"}},
		{"node -e", `node -e 'fetch("https://example.com")'`, false, all, []string{"network.fetch@1:9"}},
		{"node --eval=", `node --eval='require("child_process").execSync("id")'`, false, all, []string{"module_loading.require@1:6", "process.module@1:6"}},
		{"node -p harmless", `node -p '[1, 2, 3].map((x) => x * 2).join(",")'`, false, all, nil},
		{"node -e computed", `node -e "$CODE"`, false, all, []string{"dynamic_eval.node_e@1:9"}},
		{"node -e in bash -c", `bash -c "node -e 'fetch(1)'"`, false, all, []string{"network.fetch@1:9"}},
		{"node -e, network only", `node -e 'require("fs").readFileSync("x")'`, false, &Policy{Block: []string{Network}}, nil},
		{"node running a file", `node script.js --eval x`, false, all, nil},
		{"sh -c computed, dynamic_eval not blocked", `sh -c "$X"`, false, only(Network), nil},
		{"-c unparsable", "bash -c 'if'", false, all, []string{"syntax.unparsed@1:9"}},
		{"eval", `eval "ls"`, false, all, []string{"dynamic_eval.eval@1:1"}},
		{"eval literal checked", "eval 'curl x'", false, only(Network), []string{"network.curl@1:6"}},
		{"shell reading a pipe", `echo "$X" | bash`, false, all, []string{"dynamic_eval.shell_stdin@1:13"}},
		{"shell reading a heredoc", "bash <<'EOF'\ncurl x\nEOF\n", false, all, []string{"network.curl@1:6"}},
		{"shell running a file", "bash run.sh", false, all, []string{"module_loading.script@1:1"}},
		{"trap", "trap 'rm -f x' EXIT", false, all, []string{"filesystem.rm@1:6"}},
		{"trap computed", `trap "$x" EXIT`, false, all, []string{"dynamic_eval.trap@1:6"}},
		{"xargs sh -c", "xargs -I{} sh -c 'rm {}'", false, all, []string{"filesystem.rm@1:18"}},
		{"bash -o pipefail -c", "bash -o pipefail -c 'curl x'", false, all, []string{"network.curl@1:21"}},
		{"sh -c is POSIX", "sh -c 'a=(1)'", false, all, []string{"syntax.unparsed@1:7"}},
		{"here-string to bash", "bash <<< 'curl x'", false, all, []string{"network.curl@1:6"}},
		{"env -S", "env -S 'curl x'", false, all, []string{"network.curl@1:8"}},
		{"alias", "alias g='wget x'", false, all, []string{"network.wget@1:7"}},
		{"partly computed -c string", `bash -c "curl $URL"`, false, all, []string{"dynamic_eval.shell_c@1:9"}},
		{"two commands refused in one string", "bash -c 'ls; pwd'", false, cmds("bash *"), []string{"commands.not_allowed@1:9", "commands.not_allowed@1:9"}},
		{"dot", ". ./x.sh", false, all, []string{"module_loading.source@1:1"}},
		{"source", "source lib.sh", false, all, []string{"module_loading.source@1:1"}},

		// Sockets and redirections.
		{"exec to /dev/tcp", "exec 3<>/dev/tcp/127.0.0.1/80", false, all, []string{"low_level_network.dev_tcp@1:6"}},
		{"read from /dev/tcp", "cat < /dev/tcp/example.com/80", false, all, []string{"low_level_network.dev_tcp@1:5"}},
		{"computed /dev/tcp", `exec 3<>"/dev/tcp/$h/80"`, false, all, []string{"low_level_network.dev_tcp@1:6"}},
		{"redirect to a file", "echo hi > out.txt", false, all, []string{"filesystem.redirect@1:9"}},
		{"append", "echo x >> log", false, all, []string{"filesystem.redirect@1:8"}},
		{"stderr to a file", "ls 2> err.log", false, all, []string{"filesystem.redirect@1:4"}},
		{"all to a file", "make &> build.log", false, all, []string{"filesystem.redirect@1:6"}},
		{"computed target", `echo x > "$f"`, false, all, []string{"filesystem.redirect@1:8"}},
		{">& to a file", "echo x >&out", false, all, []string{"filesystem.redirect@1:8"}},
		{"null and duplication", "echo hi > /dev/null 2>&1; echo x >&2; echo y > /dev/fd/3 2>/dev/stderr", false, all, nil},
		{"process substitution target", "echo x > >(cat)", false, all, nil},

		// Other commands of the categories.
		{"kill", "kill %1", false, all, []string{"process.kill@1:1"}},
		{"sed -i", "sed -i 's/a/b/' f", false, all, []string{"filesystem.sed@1:1"}},
		{"sed", "sed -n 's/a/b/p' f", false, all, nil},
		{"tee to a file", "echo x | tee out", false, all, []string{"filesystem.tee@1:10"}},
		{"tee", "echo x | tee", false, all, nil},
		{"git clone", "git clone https://x", false, all, []string{"network.git@1:1"}},
		{"git -C pull", "git -C repo pull", false, all, []string{"network.git@1:1"}},
		{"git status", "git -C repo status; git log --oneline", false, all, nil},
		{"git computed subcommand", "git $sub", false, all, []string{"network.git@1:1"}},
		{"redirect of exec", "exec >log 2>&1", false, all, []string{"filesystem.redirect@1:6"}},
		{"pip install", "pip3 install requests", false, all, []string{"network.pip@1:1"}},
		{"python -m pip", "python3 -m pip install x", false, all, []string{"network.pip@1:1"}},
		{"npm ci", "npm ci", false, all, []string{"network.npm@1:1"}},
		{"only blocked categories", "curl x; rm y", false, only(Filesystem), []string{"filesystem.rm@1:9"}},

		// Programs that stay allowed with every category blocked.
		{"loop and arithmetic", "for i in $(seq 1 3); do echo $((i*2)); done\nx=$((1+2))\nwhile [ $x -gt 0 ]; do x=$((x-1)); done", false, all, nil},
		{"pipes", "printf '%s\\n' a b | grep a | wc -l\ncat file | wc -l\ngrep -r foo . | sort | uniq -c", false, all, nil},
		{"tool call", "codecell-tool t.echo '{}'", false, all, nil},
		{"read", "read -r line < input.txt; echo \"$line\"", false, all, nil},
		{"background job", "sleep 1 & wait", false, all, nil},
		{"function", `f() { echo "$1"; }; f a`, false, all, nil},
		{"heredoc", "cat <<EOF\nhello $USER\nEOF", false, all, nil},

		// Syntax.
		{"unterminated quote", `echo "abc`, false, all, []string{"syntax.unparsed@1:6"}},
		{"bash syntax in sh", "a=(1 2)", true, all, []string{"syntax.unparsed@1:3"}},

		// AllowedCommands.
		{"allowed", "ls -la; git status --short; grep foo file", false, listed, nil},
		{"allowed by system path", "/usr/bin/ls -la", false, listed, nil},
		{"local path is not the command", "./ls", false, listed, []string{"commands.not_allowed@1:1"}},
		{"subcommand not listed", "git push", false, listed, []string{"commands.not_allowed@1:1"}},
		{"second of a pipe", "grep foo file | wc -l", false, listed, []string{"commands.not_allowed@1:17"}},
		{"builtins and the tool bridge", "echo hi; printf x; codecell-tool t.echo '{}'; read x; cd /; test 1; [ 1 ]; : ok", false, listed, nil},
		{"computed name", "$cmd", false, listed, []string{"commands.computed_name@1:1"}},
		{"computed name, both rules", "$cmd", false, &Policy{Block: []string{DynamicEval}, AllowedCommands: []string{"ls"}}, []string{"dynamic_eval.computed_command@1:1", "commands.computed_name@1:1"}},
		{"wrapper line", "env ls", false, listed, []string{"commands.not_allowed@1:1"}},
		{"wrapped line", "env curl x", false, cmds("env *"), []string{"commands.not_allowed@1:5"}},
		{"bash -c allowed", "bash -c 'ls'", false, cmds("bash -c *", "ls"), nil},
		{"bash -c inner", "bash -c 'curl x'", false, cmds("bash -c *", "ls"), []string{"commands.not_allowed@1:9"}},
		{"computed argument matches *", `cat "$f"; grep "$x" file; ls "$d"`, false, cmds("cat *", "grep *", "ls"), nil},
		{"computed argument against a literal pattern", `git status "$x"`, false, cmds("git status"), []string{"commands.not_allowed@1:1"}},
		{"literal argument against a literal pattern", `git status`, false, cmds("git status"), nil},
		{"xargs appends", "ls | xargs grep foo", false, cmds("ls", "xargs *", "grep foo"), []string{"commands.not_allowed@1:12"}},
		{"xargs appends, pattern with *", "ls | xargs grep foo", false, cmds("ls", "xargs *", "grep foo *"), nil},
		{"find -exec", `find . -exec rm {} \;`, false, cmds("find *"), []string{"commands.not_allowed@1:14"}},
		{"none allowed", "ls; echo ok", false, &Policy{AllowedCommands: []string{}}, []string{"commands.not_allowed@1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			findings := CheckShell(tt.code, !tt.posix, tt.policy)
			var got []string
			for _, f := range findings {
				got = append(got, fmt.Sprintf("%s@%d:%d", f.Rule, f.Line, f.Column))
				checkFinding(t, f)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("CheckShell(%q) = %q, want %q\n%v", tt.code, got, tt.want, findings)
			}
		})
	}
}

// checkFinding checks what every finding carries: a category matching its
// rule, a message and a hint.
func checkFinding(t *testing.T, f Finding) {
	t.Helper()
	prefix, _, _ := strings.Cut(f.Rule, ".")
	wantCategory := prefix
	if prefix == "commands" || prefix == "syntax" {
		wantCategory = ""
	}
	if f.Category != wantCategory {
		t.Errorf("%s: category %q, want %q", f.Rule, f.Category, wantCategory)
	}
	if f.Message == "" || f.Hint == "" {
		t.Errorf("%s: message %q, hint %q: want both", f.Rule, f.Message, f.Hint)
	}
}

func TestCheckShellMessages(t *testing.T) {
	p := &Policy{AllowedCommands: []string{"ls", "git status*", "grep *"}}
	f := CheckShell("curl -s https://example.com", true, p)
	if len(f) != 1 {
		t.Fatalf("findings = %v, want one", f)
	}
	if !strings.Contains(f[0].Message, "curl -s https://example.com") || !strings.Contains(f[0].Message, "ls, git status*, grep *") {
		t.Errorf("message %q: want the command and the patterns", f[0].Message)
	}
	if !strings.HasPrefix(f[0].Hint, "use only these commands: ls, git status*, grep *") || !strings.Contains(f[0].Hint, "codecell-tool") {
		t.Errorf("hint %q", f[0].Hint)
	}

	f = CheckShell("bash -c 'wget x'", true, &Policy{Block: []string{Network}})
	if len(f) != 1 || !strings.Contains(f[0].Message, "wget") || !strings.Contains(f[0].Message, "bash -c") {
		t.Errorf("findings = %v, want one naming wget and bash -c", f)
	}

	long := make([]string, 40)
	for i := range long {
		long[i] = fmt.Sprintf("command-number-%d *", i)
	}
	f = CheckShell("ls", true, &Policy{AllowedCommands: long})
	if len(f) != 1 || len(f[0].Message) > 400 || !strings.Contains(f[0].Message, "more") {
		t.Errorf("findings = %v, want one with the patterns shortened", f)
	}
}

func TestCheckShellLimits(t *testing.T) {
	all := &Policy{Block: Categories}
	if f := CheckShell(strings.Repeat("curl x\n", 60), true, all); len(f) != maxShellFindings || f[0].Line != 1 || f[49].Line != 50 {
		t.Errorf("60 refused lines: %d findings, want the first %d", len(f), maxShellFindings)
	}
	for _, p := range []*Policy{nil, {}, {AllowedImports: []string{"json"}}} {
		if f := CheckShell(`echo "unterminated`, true, p); f != nil {
			t.Errorf("policy %+v: %v, want nothing checked", p, f)
		}
	}
	deep := "curl x"
	for range maxShellNesting + 2 {
		deep = "eval " + shellQuote(deep)
	}
	f := CheckShell(deep, true, &Policy{Block: []string{Network}})
	if len(f) != 1 || f[0].Rule != "syntax.too_deep" || f[0].Line != 1 || f[0].Column != 6 {
		t.Errorf("deep nesting: %v, want syntax.too_deep at 1:6", f)
	}
	wrappedDeep := strings.Repeat("nice ", maxShellNesting+5) + "curl x"
	f = CheckShell(wrappedDeep, true, &Policy{Block: []string{Network}})
	if len(f) != 1 || f[0].Rule != "syntax.too_deep" || f[0].Column != 1+5*(maxShellNesting+1) {
		t.Errorf("deep wrapping: %v, want syntax.too_deep at 1:%d", f, 1+5*(maxShellNesting+1))
	}
	if f := CheckShell(strings.Repeat("nice ", maxShellNesting)+"curl x", true, &Policy{Block: []string{Network}}); len(f) != 1 || f[0].Rule != "network.curl" {
		t.Errorf("wrapped %d deep: %v, want network.curl", maxShellNesting, f)
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// The shell check's time is proportional to the program: shapes of the
// largest size codecell takes that make parsers slow take a small multiple
// of an ordinary program of the same size.
func TestCheckShellCostProportional(t *testing.T) {
	if testing.Short() {
		t.Skip("checks programs of 200,000 characters")
	}
	const size = 200_000
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	p := &Policy{Block: Categories, AllowedCommands: []string{"echo", "cat", "grep"}}
	cost := func(code string) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			CheckShell(code, true, p)
			best = min(best, time.Since(start))
		}
		return best
	}
	ordinary := cost(fill("if [ -f \"$f\" ]; then echo \"x $a\" | grep y > /dev/null; fi\n"))
	for name, code := range map[string]string{
		"heredocs":           fill("cat <<E\nx\nE\n"),
		"one long heredoc":   "cat <<E\n" + fill("x $(a) ${b}\n") + "E\n",
		"arithmetic":         "echo $((" + fill("1+") + "1))",
		"brace expansion":    "echo " + fill("{a,b}"),
		"case patterns":      "case x in " + fill("a|") + "a) ;; esac",
		"pipeline":           fill("a|") + "a",
		"and list":           fill("a&&") + "a",
		"test expression":    "[[ " + fill("a && ") + "a ]]",
		"substitutions":      "echo " + fill("$(a)"),
		"backquotes":         "echo " + fill("`a`"),
		"code in a string":   "bash -c '" + fill("a;") + "'",
		"code in eval":       "eval \"" + fill("a;") + "\"",
		"redirections":       "a " + fill(">x "),
		"parameter defaults": "echo " + fill("${a:-b}"),
	} {
		c := cost(code)
		t.Logf("%s: %v, %.1f times an ordinary program (%v)", name, c, float64(c)/float64(ordinary), ordinary)
		if c > 40*ordinary {
			t.Errorf("%s: %v, more than 40 times an ordinary program of the same size (%v)", name, c, ordinary)
		}
	}
}
