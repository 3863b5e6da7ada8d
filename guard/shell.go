package guard

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/codecell-dev/codecell/internal/lazyre"

	"mvdan.cc/sh/v3/syntax"
)

const (
	// maxShellFindings bounds what one check reports: enough for a model
	// to fix a program, not a wall of repeats.
	maxShellFindings = 50
	// maxShellNesting bounds how deep code in strings (bash -c, eval, trap,
	// here-documents fed to a shell) and commands run by other commands
	// (env nice curl) are followed, and so the work one check does; what
	// is nested deeper is refused, since it is not checked.
	maxShellNesting = 8
)

// CheckShell checks a shell program (bash, or POSIX sh when bash is
// false) against p: the categories it blocks and AllowedCommands, applied
// to each simple command of the script. A program that does not parse is
// refused with the rule "syntax.unparsed" at the parser's position (what
// codecell cannot parse it cannot check).
//
// The program is parsed, not matched as text: every simple command is
// checked wherever it stands (pipelines, lists, compound commands,
// functions, command and process substitutions, expansions, here-documents,
// [[ ]] operands). A word's value joins its literal and quoted parts, so
// c"u"rl, 'curl' and \curl are curl; a command's name is the base name of
// its first word. Commands run by other commands are checked too: wrappers
// (env, command, builtin, exec, nohup, nice, timeout, time, xargs,
// find -exec, sudo, doas, busybox, stdbuf, setsid, chroot), and literal
// strings run as code (bash -c, sh -c, eval, trap, alias, env -S, a
// here-document fed to a shell), whose findings are reported at the
// string's position.
//
// With nothing for a shell program to check (no category blocked and no
// AllowedCommands), it returns nil without parsing.
func CheckShell(code string, bash bool, p *Policy) []Finding {
	if p.Empty() || len(p.Block) == 0 && p.AllowedCommands == nil {
		return nil
	}
	lang := syntax.LangPOSIX
	if bash {
		lang = syntax.LangBash
	}
	c := &shellCheck{p: p}
	c.script(code, lang, syntax.Pos{}, "")
	return c.result()
}

// shellCheck walks one program and collects what p refuses.
type shellCheck struct {
	p        *Policy
	findings []Finding

	// src and lang are the code being walked: the program, or a string in
	// it that runs as code.
	src  string
	lang syntax.LangVariant
	// at, when valid, is where every finding is reported: the position in
	// the program of the string being walked, whose own positions mean
	// nothing to the program's author. context names that string.
	at      syntax.Pos
	context string
	depth   int
}

// script parses src and checks every command in it. at and context say
// where src stands in the program when it is a string run as code.
func (c *shellCheck) script(src string, lang syntax.LangVariant, at syntax.Pos, context string) {
	outer := *c
	defer func() {
		findings := c.findings
		*c = outer
		c.findings = findings
	}()
	if !c.at.IsValid() {
		c.at, c.context = at, context
	}
	if c.depth >= maxShellNesting {
		c.report(at, "syntax.too_deep", "",
			fmt.Sprintf("code nested in strings more than %d deep cannot be checked", maxShellNesting),
			"write the commands out directly instead of nesting them in strings")
		return
	}
	c.src, c.lang = src, lang
	c.depth++
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
	if err != nil {
		c.unparsed(err)
		return
	}
	syntax.Walk(f, c.visit)
}

func (c *shellCheck) unparsed(err error) {
	var pos syntax.Pos
	switch e := err.(type) {
	case syntax.ParseError:
		pos = e.Pos
	case syntax.LangError:
		pos = e.Pos
	}
	text := strings.TrimPrefix(err.Error(), pos.String()+": ")
	what, runs := "this program", "the program"
	if c.at.IsValid() {
		what, runs = "this code", "that code"
	}
	c.report(pos, "syntax.unparsed", "",
		fmt.Sprintf("codecell cannot parse %s as %s (%s), and what it cannot parse it cannot check", what, langName(c.lang), text),
		fmt.Sprintf("fix the syntax error; %s runs as %s", runs, langName(c.lang)))
}

func langName(lang syntax.LangVariant) string {
	switch lang {
	case syntax.LangBash:
		return "bash"
	case syntax.LangPOSIX:
		return "POSIX sh"
	case syntax.LangZsh:
		return "zsh"
	case syntax.LangMirBSDKorn:
		return "mksh"
	}
	return lang.String()
}

func (c *shellCheck) visit(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Stmt:
		// Every simple command is the command of a statement; the
		// statement's redirections say where a shell it runs reads from.
		if call, ok := n.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			c.command(call.Args, n.Redirs, false, 0)
		}
	case *syntax.Redirect:
		c.redirect(n)
	}
	return true
}

func (c *shellCheck) report(pos syntax.Pos, rule, category, message, hint string) {
	if c.at.IsValid() {
		pos = c.at
		message += " (in " + c.context + ")"
	}
	line, col := int(pos.Line()), int(pos.Col())
	c.findings = append(c.findings, Finding{
		Rule:     rule,
		Category: category,
		Line:     max(line, 1),
		Column:   max(col, 1),
		Message:  message,
		Hint:     hint,
	})
}

// result sorts the findings by position, drops repeats (a string run as
// code reports all its findings at one place), and keeps the first
// maxShellFindings.
func (c *shellCheck) result() []Finding {
	sort.SliceStable(c.findings, func(i, j int) bool {
		a, b := c.findings[i], c.findings[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	seen := map[Finding]bool{}
	var out []Finding
	for _, f := range c.findings {
		if seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
		if len(out) == maxShellFindings {
			break
		}
	}
	return out
}

// shellCommandCategory holds the commands refused by name alone.
var shellCommandCategory = map[string]string{
	"curl": Network, "wget": Network, "ssh": Network, "scp": Network,
	"sftp": Network, "rsync": Network, "ftp": Network, "telnet": Network,
	"lynx": Network, "aria2c": Network, "http": Network, "https": Network,
	"httpie": Network, "apt": Network, "apt-get": Network, "dig": Network,
	"nslookup": Network, "host": Network, "ping": Network,

	"nc": LowLevelNetwork, "ncat": LowLevelNetwork, "netcat": LowLevelNetwork,
	"socat": LowLevelNetwork,

	"kill": Process, "pkill": Process, "killall": Process, "nohup": Process,
	"setsid": Process, "disown": Process, "renice": Process, "taskset": Process,

	"rm": Filesystem, "rmdir": Filesystem, "mv": Filesystem, "cp": Filesystem,
	"dd": Filesystem, "chmod": Filesystem, "chown": Filesystem, "chgrp": Filesystem,
	"ln": Filesystem, "mkdir": Filesystem, "touch": Filesystem, "truncate": Filesystem,
	"shred": Filesystem, "install": Filesystem, "unlink": Filesystem, "mktemp": Filesystem,
	"tar": Filesystem, "unzip": Filesystem, "gzip": Filesystem, "gunzip": Filesystem,
}

// What each category means for a shell command, and what to do instead.
var (
	shellCategoryWhy = map[string]string{
		Network:         "reaches other hosts over the network",
		LowLevelNetwork: "opens network sockets",
		Process:         "starts, replaces or signals processes",
		Filesystem:      "changes files",
	}
	shellCategoryHint = map[string]string{
		Network:         "the sandbox has no network; call the host's tools with codecell-tool instead",
		LowLevelNetwork: "the sandbox has no network; call the host's tools with codecell-tool instead",
		Process:         "run commands directly, in the foreground or as background jobs with & and wait",
		Filesystem:      "print results to standard output instead of changing files",
	}
)

// shellAlwaysAllowed are the builtins and keywords that only compute,
// allowed whatever AllowedCommands says; typeset and readonly are declare
// by other names, and time is a keyword in bash. codecell-tool is there
// too: it is how a program calls the host's tools, which have a policy of
// their own.
var shellAlwaysAllowed = map[string]bool{
	"echo": true, "printf": true, "true": true, "false": true, "test": true,
	"[": true, "read": true, "cd": true, "export": true, "local": true,
	"set": true, "shift": true, "return": true, "exit": true, ":": true,
	"declare": true, "typeset": true, "readonly": true, "unset": true,
	"let": true, "break": true, "continue": true, "wait": true, "shopt": true,
	"getopts": true, "type": true, "time": true, "codecell-tool": true,
}

// systemBinDirs are where a command's path names the command itself:
// /usr/bin/ls is ls to AllowedCommands, ./ls is not.
var systemBinDirs = map[string]bool{
	"/bin": true, "/usr/bin": true, "/usr/local/bin": true,
	"/sbin": true, "/usr/sbin": true, "/usr/local/sbin": true,
}

var (
	pipName    = lazyre.New(`^pip[0-9.]*$`)
	pythonName = lazyre.New(`^python[0-9.]*$`)
)

// command checks one simple command, words being its name and arguments,
// redirs the redirections of its statement. extra says that the command
// gets more arguments at run time (xargs appends them); wrappers counts
// the commands that run it (env in env curl).
func (c *shellCheck) command(words []*syntax.Word, redirs []*syntax.Redirect, extra bool, wrappers int) {
	nameWord, args := words[0], words[1:]
	pos := nameWord.Pos()
	if wrappers > maxShellNesting {
		c.report(pos, "syntax.too_deep", "",
			fmt.Sprintf("commands wrapped in each other more than %d deep cannot be checked", maxShellNesting),
			"run the command directly instead of through wrapper commands")
		return
	}
	base, first, ok := commandName(nameWord)
	if !ok {
		c.computedName(nameWord)
		return
	}
	c.checkAllowed(first, words, extra)
	if cat, ok := shellCommandCategory[base]; ok {
		c.refuse(pos, cat, base, base)
	}
	switch {
	case base == "git":
		if sub, ok := gitSubcommand(args); !ok || slices.Contains([]string{"clone", "fetch", "pull", "push", "ls-remote"}, sub) {
			c.refuse(pos, Network, "git", "git "+subName(sub, ok))
		}
	case pipName().MatchString(base):
		if sub, ok := pipSubcommand(args); !ok || sub == "install" || sub == "download" {
			c.refuse(pos, Network, "pip", "pip "+subName(sub, ok))
		}
	case pythonName().MatchString(base):
		if rest, ok := pythonModule(args, "pip"); ok {
			if sub, ok := pipSubcommand(rest); !ok || sub == "install" || sub == "download" {
				c.refuse(pos, Network, "pip", "python -m pip "+subName(sub, ok))
			}
		}
	case base == "npm" || base == "pnpm" || base == "yarn":
		_, i := options(args, "")
		if i < len(args) {
			sub, ok := literal(args[i])
			if !ok || slices.Contains([]string{"install", "i", "ci", "add"}, sub) {
				c.refuse(pos, Network, base, base+" "+subName(sub, ok))
			}
		}
	case base == "sed":
		if sedInPlace(args) {
			c.refuse(pos, Filesystem, "sed", "sed -i")
		}
	case base == "tee":
		if teeWritesFile(args) {
			c.refuse(pos, Filesystem, "tee", "tee to a file")
		}
	case base == "find":
		if findWrites(args) {
			c.refuse(pos, Filesystem, "find", "find -delete or -fprint")
		}
	case base == "exec":
		if _, i := options(args, "a"); i < len(args) {
			c.refuse(pos, Process, "exec", "exec")
		}
	case base == "env":
		c.envSplitString(args)
	case base == "eval":
		c.eval(pos, args)
	case base == "source" || base == ".":
		if c.p.Blocks(ModuleLoading) {
			c.report(pos, "module_loading.source", ModuleLoading,
				c.text(nameWord, words[len(words)-1])+" runs the code of another file, which codecell cannot check; this policy refuses loading code",
				"write the commands directly in this script")
		}
	case base == "alias":
		c.alias(args)
	case base == "trap":
		c.trap(args)
	case base == "node" || base == "nodejs":
		c.nodeEval(base, args)
	default:
		if lang, ok := shellLang(base); ok {
			c.shell(base, pos, lang, args, redirs)
		}
	}
	for _, w := range wrapped(base, args) {
		c.command(w.words, redirs, w.extra, wrappers+1)
	}
}

func subName(sub string, literal bool) string {
	if !literal {
		return "with a subcommand computed at run time"
	}
	return sub
}

// computedName refuses a command whose name is only known at run time.
func (c *shellCheck) computedName(w *syntax.Word) {
	text := c.text(w, w)
	if c.p.Blocks(DynamicEval) {
		c.report(w.Pos(), "dynamic_eval.computed_command", DynamicEval,
			fmt.Sprintf("the command name %s is computed at run time, so codecell cannot check which command runs; this policy refuses running code chosen at run time", text),
			"write each command's name literally; to choose between commands, use if or case with each command written out")
	}
	if c.p.AllowedCommands != nil {
		c.report(w.Pos(), "commands.computed_name", "",
			fmt.Sprintf("the command name %s is computed at run time, so codecell cannot check it against the allowed commands (%s)", text, c.patterns()),
			"write each command's name literally; "+c.allowedHint())
	}
}

// checkAllowed refuses a command that AllowedCommands does not allow.
// first is the command's name as the patterns see it.
func (c *shellCheck) checkAllowed(first string, words []*syntax.Word, extra bool) {
	if c.p.AllowedCommands == nil || shellAlwaysAllowed[first] {
		return
	}
	parts := []string{first}
	for _, w := range words[1:] {
		v, ok := literal(w)
		if !ok {
			v = "\x00"
		}
		parts = append(parts, v)
	}
	if extra {
		parts = append(parts, "\x00")
	}
	line := strings.Join(parts, " ")
	if c.p.CommandAllowed(line) {
		return
	}
	msg := fmt.Sprintf("the command %s is not allowed: this policy allows only commands matching %s", c.text(words[0], words[len(words)-1]), c.patterns())
	if strings.Contains(line, "\x00") {
		msg += "; a word computed at run time matches only *"
	}
	c.report(words[0].Pos(), "commands.not_allowed", "", msg, c.allowedHint())
}

// patterns lists AllowedCommands for a message, shortened when long.
func (c *shellCheck) patterns() string {
	if len(c.p.AllowedCommands) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for i, pat := range c.p.AllowedCommands {
		if i > 0 {
			if b.Len() > 200 {
				fmt.Fprintf(&b, " and %d more", len(c.p.AllowedCommands)-i)
				break
			}
			b.WriteString(", ")
		}
		b.WriteString(pat)
	}
	return b.String()
}

func (c *shellCheck) allowedHint() string {
	always := "shell builtins that only compute (echo, printf, test, read, cd, ...) and codecell-tool, which calls the host's tools, are always allowed"
	if len(c.p.AllowedCommands) == 0 {
		return "run no other commands; " + always
	}
	return "use only these commands: " + c.patterns() + "; " + always
}

// text is the source of the words from first to last, for a message.
func (c *shellCheck) text(first, last *syntax.Word) string {
	from, to := int(first.Pos().Offset()), int(last.End().Offset())
	if from < 0 || to > len(c.src) || from > to {
		return "(unknown)"
	}
	s := strings.Join(strings.Fields(c.src[from:to]), " ")
	if len(s) > 80 {
		cut := 77
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "..."
	}
	return "`" + s + "`"
}

// refuse reports a command of a blocked category: rule is the last part
// of the rule's name, what the command as the message names it.
func (c *shellCheck) refuse(pos syntax.Pos, category, rule, what string) {
	if !c.p.Blocks(category) {
		return
	}
	c.report(pos, category+"."+rule, category,
		fmt.Sprintf("%s %s, which this policy refuses", what, shellCategoryWhy[category]),
		shellCategoryHint[category])
}

// redirect checks a redirection: to /dev/tcp or /dev/udp it opens a
// socket; writing to anything but a standard stream or /dev/null changes
// a file.
func (c *shellCheck) redirect(r *syntax.Redirect) {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return
	}
	v := inspect(r.Word)
	if devSocket(v) {
		if c.p.Blocks(LowLevelNetwork) {
			c.report(r.Pos(), "low_level_network.dev_tcp", LowLevelNetwork,
				fmt.Sprintf("the redirection to %s opens a network socket, which this policy refuses", c.text(r.Word, r.Word)),
				shellCategoryHint[LowLevelNetwork])
		}
		return
	}
	if !c.p.Blocks(Filesystem) {
		return
	}
	switch r.Op {
	case syntax.RdrIn, syntax.DplIn:
		return
	case syntax.DplOut:
		// >&2 and >&- duplicate or close a descriptor; >&word writes a file.
		if v.literal && isDescriptor(v.text) {
			return
		}
	}
	if v.literal && harmlessTarget(v.text) {
		return
	}
	if len(r.Word.Parts) == 1 {
		if _, ok := r.Word.Parts[0].(*syntax.ProcSubst); ok {
			return
		}
	}
	op := r.Op.String()
	if r.N != nil {
		op = r.N.Value + op
	}
	c.report(r.Pos(), "filesystem.redirect", Filesystem,
		fmt.Sprintf("the redirection %s %s writes a file, which this policy refuses", op, c.text(r.Word, r.Word)),
		"print to standard output instead of writing a file; > /dev/null and 2>&1 are allowed")
}

// devSocket reports whether a redirection's target is, or may be, one of
// bash's socket paths.
func devSocket(v wordValue) bool {
	prefix, _, _ := strings.Cut(v.text, "\x00")
	for _, dev := range []string{"/dev/tcp/", "/dev/udp/"} {
		if strings.HasPrefix(prefix, dev) {
			return true
		}
		// "/dev/$proto/..." may be a socket too; "$file" is not counted.
		if !v.literal && prefix != "" && strings.HasPrefix(dev, prefix) {
			return true
		}
	}
	return false
}

func isDescriptor(s string) bool {
	s = strings.TrimSuffix(s, "-")
	return s == "" || allDigits(s)
}

func harmlessTarget(s string) bool {
	switch s {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	n, ok := strings.CutPrefix(s, "/dev/fd/")
	return ok && allDigits(n)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// shellLang is the language a shell by this name speaks.
func shellLang(name string) (syntax.LangVariant, bool) {
	switch name {
	case "bash":
		return syntax.LangBash, true
	case "sh", "dash", "ash":
		return syntax.LangPOSIX, true
	case "zsh":
		return syntax.LangZsh, true
	case "ksh", "mksh":
		return syntax.LangMirBSDKorn, true
	}
	return 0, false
}

// shell checks a shell started by the program: the string of -c, a
// here-document or here-string on its standard input, or, when neither
// can be read, the fact that its code is out of sight.
func (c *shellCheck) shell(name string, pos syntax.Pos, lang syntax.LangVariant, args []*syntax.Word, redirs []*syntax.Redirect) {
	cflag, sflag := false, false
	i := 0
scan:
	for ; i < len(args); i++ {
		v, ok := literal(args[i])
		switch {
		case !ok || v == "" || v[0] != '-' && v[0] != '+':
			break scan
		case v == "--" || v == "-":
			i++
			break scan
		case strings.HasPrefix(v, "--"):
			if v == "--rcfile" || v == "--init-file" {
				i++
			}
		default:
			for _, ch := range v[1:] {
				switch ch {
				case 'c':
					cflag = true
				case 's':
					sflag = true
				case 'o', 'O':
					i++ // the option's name
				}
			}
		}
	}
	operands := args[min(i, len(args)):]
	switch {
	case cflag:
		if len(operands) == 0 {
			return
		}
		w := operands[0]
		if v, ok := literal(w); ok {
			c.script(v, lang, w.Pos(), "the string run by "+name+" -c")
		} else if c.p.Blocks(DynamicEval) {
			c.report(w.Pos(), "dynamic_eval.shell_c", DynamicEval,
				fmt.Sprintf("%s -c runs the string %s, computed at run time, which codecell cannot check; this policy refuses running code built from strings", name, c.text(w, w)),
				fmt.Sprintf("write the commands directly in this script, or give %s -c a literal string", name))
		}
	case sflag || len(operands) == 0:
		c.shellStdin(name, pos, lang, redirs)
	default:
		if c.p.Blocks(ModuleLoading) {
			c.report(pos, "module_loading.script", ModuleLoading,
				fmt.Sprintf("%s runs the script file %s, which codecell cannot check; this policy refuses loading code from files", name, c.text(operands[0], operands[0])),
				"write the commands directly in this script")
		}
	}
}

// shellStdin checks a shell that reads its commands from standard input.
func (c *shellCheck) shellStdin(name string, pos syntax.Pos, lang syntax.LangVariant, redirs []*syntax.Redirect) {
	var in *syntax.Redirect
	for _, r := range redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			in = r
		}
	}
	if in != nil {
		var body string
		var ok bool
		switch in.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			body, ok = heredoc(in)
		case syntax.WordHdoc:
			body, ok = literal(in.Word)
		case syntax.RdrIn, syntax.RdrInOut:
			if c.p.Blocks(ModuleLoading) {
				c.report(pos, "module_loading.script", ModuleLoading,
					fmt.Sprintf("%s runs the script file %s, which codecell cannot check; this policy refuses loading code from files", name, c.text(in.Word, in.Word)),
					"write the commands directly in this script")
			}
			return
		}
		if ok {
			c.script(body, lang, in.Pos(), "the input run by "+name)
			return
		}
	}
	if c.p.Blocks(DynamicEval) {
		c.report(pos, "dynamic_eval.shell_stdin", DynamicEval,
			fmt.Sprintf("%s reads its commands from standard input here, which codecell cannot check; this policy refuses running code built at run time", name),
			fmt.Sprintf("write the commands directly in this script, or give %s -c a literal string", name))
	}
}

// eval checks eval: refused outright when dynamic_eval is blocked, and a
// literal string is checked as code either way.
func (c *shellCheck) eval(pos syntax.Pos, args []*syntax.Word) {
	if c.p.Blocks(DynamicEval) {
		c.report(pos, "dynamic_eval.eval", DynamicEval,
			"eval runs a string as code, which this policy refuses",
			"write the commands directly in this script")
	}
	if len(args) == 0 {
		return
	}
	parts := make([]string, len(args))
	for i, w := range args {
		v, ok := literal(w)
		if !ok {
			return
		}
		parts[i] = v
	}
	c.script(strings.Join(parts, " "), c.lang, args[0].Pos(), "the string run by eval")
}

// trap checks the code a trap runs.
func (c *shellCheck) trap(args []*syntax.Word) {
	opts, i := options(args, "")
	for _, o := range opts {
		if o.name == "-p" || o.name == "-l" {
			return
		}
	}
	if len(args)-i < 2 {
		return // a lone operand is a signal to reset
	}
	w := args[i]
	v, ok := literal(w)
	switch {
	case !ok:
		if c.p.Blocks(DynamicEval) {
			c.report(w.Pos(), "dynamic_eval.trap", DynamicEval,
				fmt.Sprintf("trap runs the string %s, computed at run time, which codecell cannot check; this policy refuses running code built from strings", c.text(w, w)),
				"give trap a literal string, or the name of a function written in this script")
		}
	case v == "" || v == "-" || allDigits(v):
	default:
		c.script(v, c.lang, w.Pos(), "the string run by trap")
	}
}

// alias checks the code of aliases defined with literal values.
func (c *shellCheck) alias(args []*syntax.Word) {
	for _, w := range args {
		v, ok := literal(w)
		if !ok {
			continue
		}
		if name, value, found := strings.Cut(v, "="); found {
			c.script(value, c.lang, w.Pos(), "the alias "+name)
		}
	}
}

// nodeEval checks the JavaScript that node -e (--eval) or -p (--print)
// runs, with the JavaScript check; its findings are reported at the
// string's position.
func (c *shellCheck) nodeEval(name string, args []*syntax.Word) {
	for i := 0; i < len(args); i++ {
		v, ok := literal(args[i])
		if !ok || v == "--" || !strings.HasPrefix(v, "-") {
			return // the script and its arguments: node's options end here
		}
		var code *syntax.Word
		inline, hasInline := "", false
		switch {
		case v == "-e" || v == "--eval" || v == "-p" || v == "--print" || v == "-pe":
			if i+1 < len(args) {
				code = args[i+1]
			}
		case strings.HasPrefix(v, "--eval=") || strings.HasPrefix(v, "--print="):
			_, inline, _ = strings.Cut(v, "=")
			code, hasInline = args[i], true
		default:
			continue
		}
		if code == nil {
			return
		}
		src, ok := inline, hasInline
		if !hasInline {
			src, ok = literal(code)
		}
		if !ok {
			if c.p.Blocks(DynamicEval) {
				c.report(code.Pos(), "dynamic_eval.node_e", DynamicEval,
					fmt.Sprintf("%s %s runs the string %s, computed at run time, which codecell cannot check; this policy refuses running code built from strings", name, v, c.text(code, code)),
					fmt.Sprintf("write the JavaScript directly, or give %s %s a literal string", name, v))
			}
			return
		}
		findings, syn := CheckJavaScript(src, "[eval]", false, c.p)
		if syn != nil {
			findings = []Finding{unchecked(c.p, syn.Line, syn.Column, "the JavaScript does not parse ("+syn.Message+")")}
		}
		for _, f := range findings {
			c.report(code.Pos(), f.Rule, f.Category, f.Message+" (in the JavaScript run by "+name+" "+strings.SplitN(v, "=", 2)[0]+")", f.Hint)
		}
		return
	}
}

// envSplitString checks the command line of env -S STRING.
func (c *shellCheck) envSplitString(args []*syntax.Word) {
	opts, _ := options(args, "uCS", "--unset", "--chdir", "--split-string")
	for _, o := range opts {
		if o.name != "-S" && o.name != "--split-string" {
			continue
		}
		if o.literal {
			c.script(o.value, c.lang, o.word.Pos(), "the string split by env -S")
		} else if c.p.Blocks(DynamicEval) {
			c.report(o.word.Pos(), "dynamic_eval.shell_c", DynamicEval,
				"env -S runs a command line computed at run time, which codecell cannot check; this policy refuses running code built from strings",
				"write the command directly in this script")
		}
	}
}

// gitSubcommand is git's subcommand, after its global options; ok is
// false when it is computed at run time.
func gitSubcommand(args []*syntax.Word) (string, bool) {
	_, i := options(args, "Cc", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix")
	if i == len(args) {
		return "", true
	}
	return literal(args[i])
}

// pipSubcommand is pip's subcommand, after its global options.
func pipSubcommand(args []*syntax.Word) (string, bool) {
	_, i := options(args, "", "--log", "--proxy", "--retries", "--timeout", "--exists-action",
		"--trusted-host", "--cert", "--client-cert", "--cache-dir", "--python", "--use-feature",
		"--use-deprecated", "--keyring-provider")
	if i == len(args) {
		return "", true
	}
	return literal(args[i])
}

// pythonModule returns the arguments after "-m module" in a Python
// command line, when that is the module it runs.
func pythonModule(args []*syntax.Word, module string) ([]*syntax.Word, bool) {
	for i, w := range args {
		v, ok := literal(w)
		switch {
		case !ok || v == "-c" || v == "-" || !strings.HasPrefix(v, "-"):
			return nil, false // the program or the code comes first
		case v == "-m":
			if i+1 < len(args) {
				if m, ok := literal(args[i+1]); ok && m == module {
					return args[i+2:], true
				}
			}
			return nil, false
		case strings.HasPrefix(v, "-m"):
			return args[i+1:], v[2:] == module
		}
	}
	return nil, false
}

// sedInPlace reports whether sed edits its files in place.
func sedInPlace(args []*syntax.Word) bool {
	for i := 0; i < len(args); i++ {
		v, ok := literal(args[i])
		switch {
		case !ok || len(v) < 2 || v[0] != '-':
		case v == "--":
			return false
		case strings.HasPrefix(v, "--"):
			if strings.HasPrefix(v, "--in-place") {
				return true
			}
			if v == "--expression" || v == "--file" || v == "--line-length" {
				i++
			}
		default:
			for j := 1; j < len(v); j++ {
				if v[j] == 'i' {
					return true
				}
				if strings.IndexByte("efl", v[j]) >= 0 {
					if j == len(v)-1 {
						i++
					}
					break
				}
			}
		}
	}
	return false
}

// teeWritesFile reports whether tee names a file to write.
func teeWritesFile(args []*syntax.Word) bool {
	options := true
	for _, w := range args {
		v, ok := literal(w)
		switch {
		case !ok:
			return true
		case options && v == "--":
			options = false
		case options && len(v) > 1 && v[0] == '-':
		case !harmlessTarget(v):
			return true
		}
	}
	return false
}

// findWrites reports whether find deletes files or prints into them.
func findWrites(args []*syntax.Word) bool {
	for _, w := range args {
		if v, ok := literal(w); ok {
			switch v {
			case "-delete", "-fprint", "-fprint0", "-fprintf", "-fls":
				return true
			}
		}
	}
	return false
}

// A wrappedCommand is a command that another one runs.
type wrappedCommand struct {
	words []*syntax.Word
	extra bool // the wrapper adds arguments at run time
}

// wrapped returns the commands that the command name with args runs.
func wrapped(name string, args []*syntax.Word) []wrappedCommand {
	rest := func(i int) []wrappedCommand {
		if i >= len(args) {
			return nil
		}
		return []wrappedCommand{{words: args[i:]}}
	}
	switch name {
	case "env":
		_, i := options(args, "uCS", "--unset", "--chdir", "--split-string")
		return rest(skipAssignments(args, i))
	case "sudo":
		_, i := options(args, "CDgpRrtTUu", "--close-from", "--chdir", "--group", "--prompt",
			"--chroot", "--role", "--command-timeout", "--type", "--other-user", "--user", "--host")
		return rest(skipAssignments(args, i))
	case "doas":
		_, i := options(args, "uC")
		return rest(i)
	case "command":
		opts, i := options(args, "")
		for _, o := range opts {
			if o.name == "-v" || o.name == "-V" {
				return nil // prints what the name is, runs nothing
			}
		}
		return rest(i)
	case "builtin", "nohup", "setsid":
		_, i := options(args, "")
		return rest(i)
	case "exec":
		_, i := options(args, "a")
		return rest(i)
	case "nice":
		_, i := options(args, "n", "--adjustment")
		return rest(i)
	case "timeout":
		_, i := options(args, "sk", "--signal", "--kill-after")
		return rest(i + 1) // after the duration
	case "chroot":
		_, i := options(args, "", "--userspec", "--groups")
		return rest(i + 1) // after the new root
	case "time":
		_, i := options(args, "fo", "--format", "--output")
		return rest(i)
	case "stdbuf":
		_, i := options(args, "ioe", "--input", "--output", "--error")
		return rest(i)
	case "busybox":
		if len(args) > 0 {
			if v, ok := literal(args[0]); ok && strings.HasPrefix(v, "-") {
				return nil
			}
		}
		return rest(0)
	case "xargs":
		opts, i := options(args, "adEILnPs", "--arg-file", "--delimiter", "--max-args",
			"--max-procs", "--max-chars", "--process-slot-var")
		replace := false
		for _, o := range opts {
			replace = replace || o.name == "-I" || o.name == "-i" || o.name == "--replace"
		}
		cmds := rest(i)
		for j := range cmds {
			cmds[j].extra = !replace
		}
		return cmds
	case "find":
		var cmds []wrappedCommand
		for i := 0; i < len(args); i++ {
			v, ok := literal(args[i])
			if !ok || v != "-exec" && v != "-execdir" && v != "-ok" && v != "-okdir" {
				continue
			}
			end := i + 1
			for ; end < len(args); end++ {
				if t, ok := literal(args[end]); ok && (t == ";" || t == "+") {
					break
				}
			}
			if end > i+1 {
				cmds = append(cmds, wrappedCommand{words: args[i+1 : end]})
			}
			i = end
		}
		return cmds
	}
	return nil
}

// skipAssignments skips the NAME=value words from args[i] on.
func skipAssignments(args []*syntax.Word, i int) int {
	for ; i < len(args); i++ {
		prefix, _, _ := strings.Cut(inspect(args[i]).text, "\x00")
		name, _, found := strings.Cut(prefix, "=")
		if !found || name == "" || strings.HasPrefix(name, "-") {
			break
		}
	}
	return i
}

// An option is one option of a command line.
type option struct {
	name    string       // "-n" or "--chdir"
	value   string       // its value, when it takes one and that is literal
	literal bool         // whether the value is literal
	word    *syntax.Word // the word holding the value, else the option
}

// options reads the options at the start of args the way getopt does, up
// to the first operand or "--". short lists the one-letter options that
// take a value, long the long options that do (their value may also
// follow "="). It returns the options and the index of the first operand.
// A word computed at run time is taken for an operand.
func options(args []*syntax.Word, short string, long ...string) ([]option, int) {
	var found []option
	for i := 0; i < len(args); i++ {
		v, ok := literal(args[i])
		if !ok || len(v) < 2 || v[0] != '-' {
			return found, i
		}
		if v == "--" {
			return found, i + 1
		}
		if strings.HasPrefix(v, "--") {
			name, value, hasValue := strings.Cut(v, "=")
			o := option{name: name, value: value, literal: true, word: args[i]}
			if !hasValue && slices.Contains(long, name) && i+1 < len(args) {
				i++
				o.word = args[i]
				o.value, o.literal = literal(args[i])
			}
			found = append(found, o)
			continue
		}
		for j := 1; j < len(v); j++ {
			o := option{name: "-" + v[j:j+1], literal: true, word: args[i]}
			if strings.IndexByte(short, v[j]) >= 0 {
				if j+1 < len(v) {
					o.value = v[j+1:]
				} else if i+1 < len(args) {
					i++
					o.word = args[i]
					o.value, o.literal = literal(args[i])
				}
				found = append(found, o)
				break
			}
			found = append(found, o)
		}
	}
	return found, len(args)
}

// commandName is the name of the command that word runs: base, its base
// name, for the categories, and first, the name AllowedCommands sees (the
// base name for a bare name or a system directory, else the path as
// written, with a part computed at run time as "\x00"). ok is false when
// the name is computed at run time.
func commandName(w *syntax.Word) (base, first string, ok bool) {
	v := inspect(w)
	if v.glob || v.braces {
		return "", "", false
	}
	slash := strings.LastIndexByte(v.text, '/')
	base = v.text[slash+1:]
	if !v.literal && (slash < 0 || base == "" || strings.Contains(base, "\x00")) {
		return "", "", false
	}
	if slash < 0 || v.literal && systemBinDirs[v.text[:slash]] {
		return base, base, true
	}
	return base, v.text, true
}

// literal is a word's value when it is known before the script runs.
func literal(w *syntax.Word) (string, bool) {
	v := inspect(w)
	return v.text, v.literal && !v.braces
}

// A wordValue is what can be known of a word's value before the script
// runs.
type wordValue struct {
	// text joins the word's literal and quoted literal parts, their
	// escapes resolved, with each run of parts expanded at run time as
	// "\x00".
	text string
	// literal says that no part is expanded at run time.
	literal bool
	// glob says that an unquoted *, ? or [...] makes it a pattern, and
	// braces that it is a brace expansion: either may turn into other
	// words.
	glob, braces bool
}

func inspect(w *syntax.Word) wordValue {
	v := wordValue{literal: true}
	if w == nil {
		return v
	}
	var b strings.Builder
	dynamic := func() {
		v.literal = false
		if !strings.HasSuffix(b.String(), "\x00") {
			b.WriteByte(0)
		}
	}
	for _, part := range w.Parts {
		switch part := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(part.Value, ""))
			v.glob = v.glob || hasGlob(part.Value)
		case *syntax.SglQuoted:
			if part.Dollar {
				b.WriteString(ansiC(part.Value))
			} else {
				b.WriteString(part.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range part.Parts {
				if lit, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescape(lit.Value, "$`\"\\"))
				} else {
					dynamic()
				}
			}
		default:
			dynamic()
		}
	}
	v.text = b.String()
	// SplitBraces rewrites the word it is given: give it a copy.
	split := &syntax.Word{Parts: w.Parts}
	if syntax.SplitBraces(split) {
		v.braces = slices.ContainsFunc(split.Parts, func(p syntax.WordPart) bool {
			_, ok := p.(*syntax.BraceExp)
			return ok
		})
	}
	return v
}

// heredoc is the body of a here-document when it is known before the
// script runs.
func heredoc(r *syntax.Redirect) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	quoted := false
	for _, part := range r.Word.Parts {
		lit, ok := part.(*syntax.Lit)
		quoted = quoted || !ok || strings.Contains(lit.Value, `\`)
	}
	var b strings.Builder
	for _, part := range r.Hdoc.Parts {
		lit, ok := part.(*syntax.Lit)
		switch {
		case !ok:
			return "", false
		case quoted:
			b.WriteString(lit.Value)
		default:
			b.WriteString(unescape(lit.Value, "$`\\"))
		}
	}
	return b.String(), true
}

// unescape resolves backslashes in source text: a backslash before a
// newline joins the lines; before one of special, or before anything when
// special is "" (unquoted text), it stands for that character; elsewhere
// it is itself.
func unescape(s, special string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		next := s[i+1]
		switch {
		case next == '\n':
			i++
		case special == "" || strings.IndexByte(special, next) >= 0:
			b.WriteByte(next)
			i++
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}

// hasGlob reports whether unquoted source text holds an unescaped *, ?,
// or [ closed by ].
func hasGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?':
			return true
		case '[':
			if strings.IndexByte(s[i+1:], ']') >= 0 {
				return true
			}
		}
	}
	return false
}

// ansiC decodes the body of a $'...' string as bash does, up to a NUL,
// where bash ends the string.
func ansiC(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		var r rune
		switch e := s[i]; e {
		case 'a':
			r = '\a'
		case 'b':
			r = '\b'
		case 'e', 'E':
			r = 0x1b
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'v':
			r = '\v'
		case '\\', '\'', '"', '?':
			r = rune(e)
		case 'c':
			if i+1 == len(s) {
				b.WriteString(`\c`)
				continue
			}
			i++
			r = rune(s[i] & 0x1f)
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			n := hexDigits(s[i+1:], digits)
			if n == 0 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			code, _ := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			i += n
			if e == 'x' {
				if code == 0 {
					return b.String()
				}
				b.WriteByte(byte(code))
				continue
			}
			r = rune(code)
		default:
			if e < '0' || e > '7' {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			n := 1
			for n < 3 && i+n < len(s) && s[i+n] >= '0' && s[i+n] <= '7' {
				n++
			}
			code, _ := strconv.ParseUint(s[i:i+n], 8, 32)
			i += n - 1
			if code&0xff == 0 {
				return b.String()
			}
			b.WriteByte(byte(code))
			continue
		}
		if r == 0 {
			return b.String()
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hexDigits counts the hex digits at the start of s, at most limit.
func hexDigits(s string, limit int) int {
	n := 0
	for n < limit && n < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[n]) >= 0 {
		n++
	}
	return n
}
