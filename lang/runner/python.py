"""codecell's Python runner: runs one program under the code-mode rules.

Started as `python3 -I -B runner.py [--policy FILE] [--check-only] VALUE_FD
TOOL_FD VALUE_LIMIT FILENAME SOURCE WORKSPACE [ARGS...]`, or from its code
compiled in advance by a bootstrap that sets the same sys.argv. The program's
source is turned into one function, so that top-level `await` and `return`
work and the value of a final expression becomes the result; every name the
program binds at top level is declared global in that function, so the
program behaves as a module. The result travels to the host as one JSON
record on an inherited file descriptor, never through stdout.

With --policy, FILE holds a guardrail policy (guard.Policy.RunnerFile's
format). The runner checks the program's syntax tree against it before
running anything, and sends {"guard": [findings]} and exits with status 3
instead of running a program the policy refuses; while the program runs,
imports the policy blocks raise ModuleBlockedError. With --check-only, the
runner sends {"guard": [findings]} (possibly empty) and runs nothing.
"""

import sys

# sys.path as Python set it up, before the workspace joins it, and the
# workspace: the runner's own imports come from the one, never the other.
_BASE_PATH = list(sys.path)
_WORKSPACE = None


# The file the program's source was read from, when it was (not a live
# session's cell): Python's own report of a failure reads its lines there.
_SOURCE = None


# json's functions as the runner found them before any program ran, where
# it could (a live session, a fork server's template): a program that
# replaces json.dumps changes its own json, not the runner's records.
_JSON = None


def _keep_json():
    global _JSON
    import json
    import types

    _JSON = types.SimpleNamespace(dumps=json.dumps, loads=json.loads)


def _std(name):
    """The module name for the runner's own use, imported from where
    Python's modules are and never from the workspace: a json.py or
    asyncio.py a program left there (in a session, for the next run) must
    not become the runner's. A module the program itself loaded from the
    workspace under that name stays the program's; the runner gets its own
    copy."""
    if name == "json" and _JSON is not None:
        return _JSON
    m = sys.modules.get(name)
    if m is not None and not _in_workspace(m):
        return m
    if _WORKSPACE is None:
        __import__(name)
        return sys.modules[name]
    saved_path, saved_module = sys.path[:], sys.modules.pop(name, None)
    try:
        sys.path[:] = _BASE_PATH
        __import__(name)
        return sys.modules[name]
    finally:
        sys.path[:] = saved_path
        if saved_module is not None:
            sys.modules[name] = saved_module


def _in_workspace(module):
    f = getattr(module, "__file__", None)
    if not f or _WORKSPACE is None:
        return False
    import os

    return os.path.realpath(f).startswith(os.path.realpath(_WORKSPACE) + os.sep)


def _codecell_main():
    # Only builtin modules here: a program that prints a line must not pay
    # for importing ast, json or re. The rest is imported on the paths that
    # need it.
    import os

    runner_path = sys.argv[0]
    args = sys.argv[1:]
    policy_file, check_only = None, False
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt == "--policy" and args:
            policy_file = args.pop(0)
        elif opt == "--check-only":
            check_only = True
        else:
            sys.exit("codecell runner: unknown option %s" % opt)
    value_fd, tool_fd, value_limit, filename, source, workspace = args[:6]
    value_fd, tool_fd, value_limit = int(value_fd), int(tool_fd), int(value_limit)
    # The program's own subprocesses must not inherit the result channel.
    os.set_inheritable(value_fd, False)

    def send_bytes(data):
        view = memoryview(data)
        while view:
            n = os.write(value_fd, view)
            view = view[n:]

    with open(source, encoding="utf-8", errors="surrogateescape") as f:
        src = f.read()
    global _SOURCE
    _SOURCE = source
    policy = None
    if policy_file is not None or check_only:
        _load_guard(runner_path)
    if policy_file is not None:
        with open(policy_file, encoding="utf-8") as f:
            policy = _Policy(f.read())

    sys.argv = [filename] + args[6:]
    sys.stdout.reconfigure(line_buffering=True)
    mod, hooks = _program_module(workspace, filename, _ToolChannel(tool_fd))

    def before_run(is_async):
        star_check = None
        if policy is not None and policy.checks_imports():
            # After the runner's own setup, before the program's first line:
            # from here on, every import is checked for whose it is.
            star_check = _install_import_guard(policy, mod.__dict__, hooks, workspace)
        mod.__dict__["__codecell_star_import__"] = _star_importer(mod.__dict__, star_check)
        # What the runner needs while the program runs is loaded now, while
        # nothing of the workspace can be: asyncio for a program that awaits,
        # json and threading for one that calls tools.
        if is_async:
            import asyncio  # noqa: F401
        if "call_tool" in src or "tools" in src:
            import json  # noqa: F401
            import threading  # noqa: F401
        _join_workspace(workspace)
        mod.__dict__["PolicyBlockedError"] = PolicyBlockedError
        if policy is not None and policy.block:
            # Last before the program: from here on, what the policy refuses
            # is refused when it happens, whatever way the program found to it.
            _install_audit_hook(policy, filename)

    status = _execute(src, filename, policy, check_only, mod, hooks, value_limit, send_bytes, before_run)
    if status is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _program_module(workspace, filename, tools):
    """The module the program runs as, __main__, with the names code mode
    gives it, and the import hooks that serve it."""
    import os

    mod = type(sys)("__main__")
    mod.__file__ = os.path.join(workspace, filename)
    mod.__builtins__ = __builtins__
    mod.__dict__["call_tool"] = tools.call
    mod.__dict__["call_tool_sync"] = tools.call_sync
    mod.__dict__["tools"] = _ToolRef(tools, "")
    mod.__dict__["ToolError"] = ToolError
    mod.__dict__["ModuleBlockedError"] = ModuleBlockedError
    hooks = _ImportHooks(workspace)
    sys.meta_path.insert(0, hooks)
    return mod, hooks


def _join_workspace(workspace):
    """The workspace joins the path, and last: the program's own modules
    are found there, never in place of a module Python or an installed
    package provides. A json.py or asyncio.py that an earlier run left in a
    session's workspace stays a file, not the next run's json or asyncio;
    nothing the runner needed came from there."""
    global _WORKSPACE
    _WORKSPACE = workspace
    _join_packages()
    sys.path.append(workspace)


def _join_packages():
    """The packages codecell installed for the program (CODECELL_PYTHONPATH,
    a read-only directory) join the path after Python's own modules and
    before the system's packages, where a virtual environment's
    site-packages would be: the version asked for wins over one the system
    happens to have. (-I makes Python ignore PYTHONPATH.)"""
    import os

    extra = [p for p in os.environ.get("CODECELL_PYTHONPATH", "").split(":") if p and p not in sys.path]
    if not extra:
        return
    at = len(sys.path)
    for i, p in enumerate(sys.path):
        if p.endswith("-packages"):
            at = i
            break
    sys.path[at:at] = extra


def _execute(src, filename, policy, check_only, mod, hooks, value_limit, send_bytes, before_run):
    """Compiles the program under the code-mode rules, checks it against
    the policy, and runs it in mod, sending its records with send_bytes.
    before_run, if given, is called with whether the program awaits, after
    the checks and before any of the program runs. Returns None when the
    program ran to its end and its value was sent, else the status it ends
    with: 1 for a syntax error or a failure, 3 for the guardrails' refusal,
    0 for a check. SystemExit is the caller's."""
    import _ast

    def send(record):
        try:
            data = _dumps(record).encode("utf-8")
        except Exception:
            json = _std("json")

            data = json.dumps(record, ensure_ascii=False, allow_nan=False)
            try:
                data = data.encode("utf-8")
            except UnicodeEncodeError:
                data = json.dumps(record, ensure_ascii=True, allow_nan=False).encode()
        send_bytes(data)

    def remember_source():
        # Tracebacks read the program's lines through linecache.
        linecache = _std("linecache")

        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)

    findings = None
    try:
        tree = compile(src, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        if policy is not None or check_only:
            # Before _to_function, which rewrites the tree.
            findings = _guard_findings(_ast, tree, src, policy)
        tree, is_async = _to_function(_ast, tree)
        code = compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as e:
        if not _python_reports(e, None):
            traceback = _std("traceback")

            remember_source()
            sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
        sys.stderr.flush()
        send({"error": {"type": "SyntaxError", "message": str(e.msg), "filename": filename,
                        "line": e.lineno or 0, "column": e.offset or 0, "syntax": True}})
        send_bytes(b"\n")
        return 1
    if check_only or findings:
        # Nothing of the program has run.
        send({"guard": findings or []})
        send_bytes(b"\n")
        return 0 if check_only else 3

    if before_run is not None:
        before_run(is_async)
    # The first line on the result channel is the runner's, written before
    # any of the program runs: the host trusts its verdict (a syntax error,
    # the guardrails' findings, or that the program starts), and takes what
    # follows as the program's value, which the program could have written
    # itself.
    send_bytes(b'{"start":true}\n')
    sys.modules["__main__"] = mod
    exec(code, mod.__dict__)
    cell = mod.__dict__.pop("<module>")

    try:
        if is_async:
            asyncio = _std("asyncio")

            value = asyncio.run(cell())
        else:
            value = cell()
    except SystemExit:
        hooks.finish()
        raise
    except BaseException as e:  # the program's failure, whatever it was
        hooks.finish()
        _report_failure(e, filename, send, remember_source)
        return 1
    hooks.finish()

    if value is None:
        send_bytes(b"{}")
        return None
    warnings = []
    try:
        plain = _plain(value, "$", 0, set(), warnings)
        try:
            data = _dumps(plain)
        except (_Costly, TypeError):
            data = _std("json").dumps(plain, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except Exception as e:  # a value whose conversion itself fails
        warnings.append("$: %s could not be converted (%s); replaced by its repr()" % (type(value).__name__, e))
        data = _dumps(_safe_repr(value))
    size = len(data.encode("utf-8", "surrogatepass"))
    if size > value_limit:
        send({"value_too_large": size, "warnings": warnings})
        return None
    record = '{"value":' + data + ',"warnings":' + _dumps(warnings) + "}"
    try:
        send_bytes(record.encode("utf-8"))
    except UnicodeEncodeError:
        send({"value": _std("json").loads(data), "warnings": warnings})
    return None


class ToolError(RuntimeError):
    """A failed tool call. str(e) is the error envelope as JSON; e.envelope
    holds it parsed: error_kind, error_code, message, retryable, hints."""

    def __init__(self, envelope):
        json = _std("json")

        self.envelope = envelope
        super().__init__(json.dumps(envelope))


class _ToolRef:
    """tools.server.tool(key=value) (or tools.server.tool({"key": value}))
    is await-able, and calls the tool "server.tool"; tools["server.tool"]
    and tools.server["get-sum"] name tools whose names are not Python
    names. An attribute that is not a Python name may be written with _ for
    - (tools.everything.get_sum calls "everything.get-sum" when no tool is
    named "everything.get_sum"): the host resolves it."""

    __slots__ = ("_channel", "_name")

    def __init__(self, channel, name):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return self[attr]

    def __getitem__(self, key):
        if not isinstance(key, str) or not key:
            raise TypeError("tools[...]: a tool's name is a non-empty string, such as tools[\"server.tool\"]")
        name = self._name + "." + key if self._name else key
        return _ToolRef(self._channel, name)

    def __setattr__(self, attr, value):
        raise AttributeError("tools is read-only: call a tool as await tools.%s(...)" % attr)

    def __call__(self, *args, **kwargs):
        if not self._name:
            raise TypeError("tools is not a function: call await tools.server.tool(key=value)")
        if len(args) > 1 or (args and not isinstance(args[0], dict) and args[0] is not None):
            raise TypeError("tools.%s: pass params as keywords (key=value) or as one dict, not %s" % (
                self._name, ", ".join(type(a).__name__ for a in args)))
        params = dict(args[0]) if args and args[0] is not None else {}
        params.update(kwargs)
        return self._channel.call(self._name, params)

    def __repr__(self):
        return "<tool %s>" % self._name if self._name else "<tools>"


class _ToolChannel:
    """The program's end of the tool channel: JSON-RPC 2.0, one object per
    line, on an inherited socket. A reader thread hands each response to the
    call that waits for it, so calls made at once (asyncio.gather) are in
    flight at once, from any event loop or thread."""

    def __init__(self, fd):
        self.fd = fd
        self.started = False

    def _start(self):
        threading = _std("threading")

        self.lock = threading.Lock()
        self.next_id = 0
        self.waiting = {}
        self.closed = None
        threading.Thread(target=self._read, name="codecell-tools", daemon=True).start()
        self.started = True

    @staticmethod
    def _as_handle(options):
        if options is None:
            return False
        if not isinstance(options, dict) or set(options) - {"as"} or options.get("as") not in (None, "handle"):
            raise TypeError('call_tool: options are {"as": "handle"}, to keep the result on the host '
                            "and read it in pages, or nothing")
        return options.get("as") == "handle"

    def _send(self, name, params, deliver, as_handle=False):
        json = _std("json")

        if not isinstance(name, str) or not name:
            raise TypeError("call_tool: the tool's name must be a non-empty string")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise TypeError("call_tool: params must be a dict (the tool's JSON object), not %s" % type(params).__name__)
        body = '{"name":%s,"arguments":%s%s}' % (
            json.dumps(name), json.dumps(params, allow_nan=False), ',"as":"handle"' if as_handle else "")
        self._write("tools/call", body, deliver)

    def _write(self, method, body, deliver):
        if not self.started:
            self._start()
        with self.lock:
            if self.closed is not None:
                deliver({"error": {"data": self.closed}})
                return
            self.next_id += 1
            i = self.next_id
            self.waiting[i] = deliver
            line = '{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}\n' % (i, method, body)
            data = line.encode()
            import os

            while data:
                n = os.write(self.fd, data)
                data = data[n:]

    def _read(self):
        json = _std("json")
        import os

        buf = b""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    deliver = self.waiting.pop(msg.get("id"), None)
                if deliver is not None:
                    deliver(msg)
        with self.lock:
            self.closed = {"error_kind": "internal", "error_code": "TOOL_CHANNEL_CLOSED",
                           "message": "the tool channel closed", "retryable": False}
            waiting, self.waiting = self.waiting, {}
        for deliver in waiting.values():
            deliver({"error": {"data": self.closed}})

    @staticmethod
    def _outcome(msg):
        if "error" in msg:
            err = msg["error"]
            env = err.get("data") or {"error_kind": "internal", "error_code": "TOOL_CHANNEL_ERROR",
                                       "message": err.get("message", "the tool call failed"), "retryable": False}
            raise ToolError(env)
        return msg.get("result")

    async def call(self, name, params=None, options=None):
        """await call_tool(name, params): calls a host tool and returns its
        result; a failure raises ToolError, a RuntimeError whose message is
        the error envelope JSON. With options {"as": "handle"}, the result
        stays on the host and a ToolHandle comes back instead."""
        as_handle = self._as_handle(options)
        result = await self._await(lambda deliver: self._send(name, params, deliver, as_handle))
        return ToolHandle(self, result) if as_handle else result

    def call_sync(self, name, params=None, options=None):
        """call_tool_sync(name, params): call_tool for code without an event
        loop; it blocks until the result comes."""
        as_handle = self._as_handle(options)
        result = self._wait(lambda deliver: self._send(name, params, deliver, as_handle))
        return ToolHandle(self, result) if as_handle else result

    async def _await(self, send):
        asyncio = _std("asyncio")

        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def deliver(msg):
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(msg))

        send(deliver)
        return self._outcome(await fut)

    def _wait(self, send):
        threading = _std("threading")

        done = threading.Event()
        box = []

        def deliver(msg):
            box.append(msg)
            done.set()

        send(deliver)
        done.wait()
        return self._outcome(box[0])

    def _read_body(self, handle, offset, length):
        json = _std("json")

        if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or length < 0:
            raise TypeError("ToolHandle.read: offset and length are whole numbers of bytes, 0 or more")
        return '{"handle":%s,"offset":%d,"length":%d}' % (json.dumps(handle), offset, length)

    async def read(self, handle, offset, length):
        body = self._read_body(handle, offset, length)
        return await self._await(lambda deliver: self._write("handles/read", body, deliver))

    def read_sync(self, handle, offset, length):
        body = self._read_body(handle, offset, length)
        return self._wait(lambda deliver: self._write("handles/read", body, deliver))


class ToolHandle:
    """A tool's result kept on the host: call_tool(name, params, {"as":
    "handle"}). h.size bytes of h.type: "text" (the text of a result that is
    a string) or "json" (the result's JSON). Read it a page at a time (await
    h.read(offset, length) gives {"data", "next", "eof", ...}; async for
    page in h.pages()), whole (await h.text(), await h.json()), or into a
    file (await h.save(path)); each has a _sync twin. Only what the program
    prints or returns reaches the model. It lasts as long as the run."""

    def __init__(self, channel, info):
        self._channel = channel
        self.handle = info.get("handle")
        self.tool = info.get("tool")
        self.type = info.get("type")
        self.size = info.get("size", 0)

    def __repr__(self):
        return "<ToolHandle %s: %d bytes of %s from %s>" % (self.handle, self.size, self.type, self.tool)

    async def read(self, offset=0, length=0):
        return await self._channel.read(self.handle, offset, length)

    def read_sync(self, offset=0, length=0):
        return self._channel.read_sync(self.handle, offset, length)

    async def pages(self, length=0):
        offset = 0
        while True:
            page = await self.read(offset, length)
            if page["data"]:
                yield page["data"]
            if page["eof"]:
                return
            offset = page["next"]

    def pages_sync(self, length=0):
        offset = 0
        while True:
            page = self.read_sync(offset, length)
            if page["data"]:
                yield page["data"]
            if page["eof"]:
                return
            offset = page["next"]

    async def text(self):
        return "".join([page async for page in self.pages()])

    def text_sync(self):
        return "".join(self.pages_sync())

    async def json(self):
        return _std("json").loads(await self.text())

    def json_sync(self):
        return _std("json").loads(self.text_sync())

    async def save(self, path):
        """Writes the handle's text (UTF-8) to path; returns its size."""
        with open(path, "w", encoding="utf-8", newline="") as f:
            async for page in self.pages():
                f.write(page)
        return self.size

    def save_sync(self, path):
        with open(path, "w", encoding="utf-8", newline="") as f:
            for page in self.pages_sync():
                f.write(page)
        return self.size


class ModuleBlockedError(ModuleNotFoundError):
    """An import the sandbox's policy refuses. e.module names the module and
    e.rule the rule that refuses it; str(e) says what to do instead."""

    def __init__(self, message, module=None, rule=None):
        super().__init__(message, name=module)
        self.module = module
        self.rule = rule


class PolicyBlockedError(PermissionError):
    """An action the sandbox's policy refuses at run time (a process
    started, a socket opened, code built from a string run, a file written).
    e.event names the Python audit event and e.rule the rule; str(e) says
    what to do instead; e.envelope is codecell's error envelope for it
    (error_code SANDBOX_POLICY_BLOCKED), as a tool's failure carries one.
    A program may catch it and go on."""

    error_code = "SANDBOX_POLICY_BLOCKED"

    def __init__(self, message, event=None, rule=None):
        super().__init__(message)
        self.event = event
        self.rule = rule

    @property
    def envelope(self):
        return {"error_kind": "guardrail", "error_code": self.error_code, "message": str(self),
                "retryable": False, "hints": ["catch PolicyBlockedError (a PermissionError) to go on without it"],
                "_meta": {"event": self.event, "rule": self.rule}}


def _load_guard(runner_path):
    """Defines the guardrails' functions (see BEGIN GUARD), from the code
    compiled apart next to the runner's, unless the runner runs from its
    source, which has them."""
    if "_guard_findings" in globals():
        return
    import marshal
    import os

    with open(os.path.join(os.path.dirname(runner_path), "guard.code"), "rb") as f:
        code = marshal.loads(f.read())
    exec(code, globals())


class _ImportHooks:
    """The runner's sys.meta_path finder. It finds no module itself: it
    refuses, when a policy is installed, what the program may not import;
    sets matplotlib up before its first import; and makes pyplot save its
    figures in the workspace. A program that imports none of these pays one
    call per module it loads."""

    def __init__(self, workspace):
        self.workspace = workspace
        self.check = None  # the import guard's, when a policy is installed
        self.config_dir = None  # an MPLCONFIGDIR made for this run

    def find_spec(self, name, path=None, target=None):
        if self.check is not None:
            self.check(name)
        if name == "matplotlib":
            self._configure_matplotlib()
        elif name == "matplotlib.pyplot":
            return self._pyplot_spec(name, path, target)
        return None

    def _configure_matplotlib(self):
        # Set here, not before the program starts: the environment of a
        # program that does not use matplotlib stays as it was given.
        import os

        # There is no display: Agg, unless the program (or its environment,
        # or a matplotlibrc it keeps) chose a backend. matplotlib.use() and
        # a matplotlibrc in the working directory win over this anyway; the
        # user's own matplotlibrc is read from where it is, though the
        # configuration directory is a fresh one.
        chosen = "MPLBACKEND" in os.environ or "MATPLOTLIBRC" in os.environ or os.path.isfile("matplotlibrc")
        if "MPLCONFIGDIR" not in os.environ and "MATPLOTLIBRC" not in os.environ:
            config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.environ.get("HOME", "/nonexistent"), ".config")
            user_rc = os.path.join(config_home, "matplotlib", "matplotlibrc")
            if os.path.isfile(user_rc):
                os.environ["MATPLOTLIBRC"] = user_rc
                chosen = chosen or _rc_sets_backend(user_rc)
        if not chosen:
            os.environ["MPLBACKEND"] = "Agg"
        if "MPLCONFIGDIR" in os.environ:
            return
        # The sandbox's HOME may not be writable, and matplotlib then warns
        # on stderr. A fresh directory, not a shared one: another run must
        # not be able to leave a font cache this one reads.
        try:
            tempfile = _std("tempfile")

            self.config_dir = tempfile.mkdtemp(prefix="matplotlib-")
            os.environ["MPLCONFIGDIR"] = self.config_dir
        except OSError:
            return
        # Building its font list, matplotlib runs fc-list, whose cache would
        # otherwise land in HOME, which may be the workspace: files the
        # program did not make.
        if "XDG_CACHE_HOME" not in os.environ:
            os.environ["XDG_CACHE_HOME"] = os.path.join(self.config_dir, "cache")

    def _pyplot_spec(self, name, path, target):
        after = False
        for finder in list(sys.meta_path):
            if finder is self:
                after = True
                continue
            find = getattr(finder, "find_spec", None)
            if not after or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        real_exec = getattr(spec.loader, "exec_module", None)
        if real_exec is None:
            return spec
        workspace = self.workspace

        def exec_module(module):
            real_exec(module)
            _hook_pyplot(module, workspace)

        try:
            spec.loader.exec_module = exec_module
        except AttributeError:
            pass  # figures are still saved when the program ends
        return spec

    def finish(self):
        """Saves the figures still open, as a notebook shows them at the end
        of a cell."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None and _saving_figures():
            try:
                _save_figures(plt, self.workspace, at_end=True)
            except BaseException:
                pass
        if self.config_dir is not None:
            shutil = _std("shutil")

            shutil.rmtree(self.config_dir, ignore_errors=True)
            self.config_dir = None


def _rc_sets_backend(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return any(line.split("#", 1)[0].strip().startswith("backend") for line in f)
    except OSError:
        return False


def _saving_figures():
    """Whether figures are saved for the program: CODECELL_SAVE_FIGURES=0
    (or false, no, off) in its environment, which the program may also set
    itself, turns it off."""
    import os

    return os.environ.get("CODECELL_SAVE_FIGURES", "1").strip().lower() not in ("0", "false", "no", "off")


def _hook_pyplot(plt, workspace):
    """There is no display: pyplot.show() and Figure.show() save the figures
    in the workspace, where they become the run's files. With saving turned
    off (CODECELL_SAVE_FIGURES=0) they leave the figures as they are."""
    real_show = plt.show

    def show(*args, **kwargs):
        if not _saving_figures():
            return None
        _save_figures(plt, workspace)

    show.__name__, show.__qualname__, show.__wrapped__ = real_show.__name__, real_show.__qualname__, real_show
    show.__doc__ = "Saves each open figure in the workspace as figure-N.png, then closes it."
    plt.show = show
    figure = getattr(plt, "Figure", None)
    if figure is not None:
        def figure_show(fig, *args, **kwargs):
            if not _saving_figures():
                return None
            _save_figure(fig, workspace)
            plt.close(fig)

        figure_show.__doc__ = "Saves the figure in the workspace as figure-N.png, then closes it."
        figure.show = figure_show
        # A figure the program saved itself is not saved again when it ends:
        # savefig marks it (a change after the save is saved, as a new file).
        real_savefig = figure.savefig

        def savefig(fig, *args, **kwargs):
            result = real_savefig(fig, *args, **kwargs)
            try:
                fig._codecell_saved = _figure_state(fig)
            except Exception:
                pass
            return result

        savefig.__name__, savefig.__qualname__, savefig.__wrapped__ = real_savefig.__name__, real_savefig.__qualname__, real_savefig
        savefig.__doc__ = real_savefig.__doc__
        figure.savefig = savefig


def _figure_state(fig):
    """What a figure holds, roughly: its axes and their artists, so that a
    figure changed after the program saved it is told apart."""
    return tuple((id(ax), len(ax.get_children())) for ax in fig.get_axes())


def _save_figures(plt, workspace, at_end=False):
    for num in plt.get_fignums():
        fig = plt.figure(num)
        saved = getattr(fig, "_codecell_saved", None)
        if not (at_end and saved is not None and saved == _figure_state(fig)):
            _save_figure(fig, workspace)
        plt.close(fig)


# The file format of a figure saved under a backend the program chose that
# writes one; PNG under any other.
_BACKEND_FORMATS = {"svg": "svg", "pdf": "pdf", "ps": "ps", "pgf": "pdf"}


def _save_figure(fig, workspace):
    import os

    ext = "png"
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:
        try:
            ext = _BACKEND_FORMATS.get(str(mpl.get_backend()).lower(), "png")
        except Exception:
            pass
    n = 1
    while os.path.lexists(os.path.join(workspace, "figure-%d.%s" % (n, ext))):
        n += 1
    name = "figure-%d.%s" % (n, ext)
    try:
        fig.savefig(os.path.join(workspace, name), format=ext, bbox_inches="tight")
    except Exception as e:
        sys.stderr.write("could not save %s: %s\n" % (name, _safe_str(e)))


def _children(ast, n):
    for name in n._fields:
        v = getattr(n, name, None)
        if isinstance(v, ast.AST):
            yield v
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, ast.AST):
                    yield item


def _located(node, src):
    """Gives node the source position of src, as ast.copy_location does."""
    node.lineno = getattr(src, "lineno", None) or 1
    node.col_offset = getattr(src, "col_offset", None) or 0
    node.end_lineno = getattr(src, "end_lineno", None) or node.lineno
    node.end_col_offset = getattr(src, "end_col_offset", None) or node.col_offset
    return node


def _to_function(ast, tree):
    """Wraps the module's statements in `def <module>()` (async when the
    program awaits at top level), declaring every top-level name global.
    It uses the builtin _ast module, not ast, which costs milliseconds to
    import."""
    names = set()
    state = {"async": False}

    def visit(n):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(n.name)
            for d in n.decorator_list:
                visit(d)
            visit_arguments(n.args)
            if n.returns is not None:
                visit(n.returns)
            return
        if isinstance(n, ast.ClassDef):
            names.add(n.name)
            for d in n.decorator_list + n.bases + n.keywords:
                visit(d)
            return
        if isinstance(n, ast.Lambda):
            visit_arguments(n.args)
            return
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            # Comprehension variables are the comprehension's own; only a
            # walrus inside binds in the enclosing (top-level) scope.
            for g in n.generators:
                if g.is_async and not isinstance(n, ast.GeneratorExp):
                    state["async"] = True
                visit(g.iter)
                for cond in g.ifs:
                    visit(cond)
            for part in ("elt", "key", "value"):
                if hasattr(n, part):
                    visit(getattr(n, part))
            return
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.NamedExpr):
            names.add(n.target.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name != "*":
                    names.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.Global):
            names.update(n.names)
        elif isinstance(n, ast.Nonlocal):
            raise _syntax_error("nonlocal declaration not allowed at module level", n)
        elif isinstance(n, (ast.Yield, ast.YieldFrom)):
            raise _syntax_error("'yield' outside function", n)
        elif isinstance(n, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            state["async"] = True
        if hasattr(ast, "MatchAs") and isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        if hasattr(ast, "MatchMapping") and isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
        for child in _children(ast, n):
            visit(child)

    def visit_arguments(a):
        for d in a.defaults + [d for d in a.kw_defaults if d is not None]:
            visit(d)
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None and arg.annotation is not None:
                visit(arg.annotation)

    for stmt in tree.body:
        visit(stmt)

    def rewrite(stmts):
        """Rewrites the statements of the top-level scope, including those in
        its if/for/while/try/with/match blocks, but not in functions or
        classes, which keep their own scopes."""
        out = []
        for n in stmts:
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                # `global x` and `x: int` cannot share a function: keep the
                # value, drop the annotation.
                n = _located(ast.Assign(targets=[n.target], value=n.value), n) if n.value is not None else _located(ast.Pass(), n)
            elif isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
                # `import *` is only allowed at module level.
                call = _located(ast.Call(func=_located(ast.Name(id="__codecell_star_import__", ctx=ast.Load()), n),
                                         args=[_located(ast.Constant(n.module or ""), n), _located(ast.Constant(n.level), n)],
                                         keywords=[]), n)
                n = _located(ast.Expr(value=call), n)
            elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody"):
                    v = getattr(n, field, None)
                    if isinstance(v, list) and v and isinstance(v[0], ast.stmt):
                        setattr(n, field, rewrite(v))
                for h in getattr(n, "handlers", None) or []:
                    h.body = rewrite(h.body)
                for c in getattr(n, "cases", None) or []:
                    c.body = rewrite(c.body)
            out.append(n)
        return out

    future = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    body = rewrite([s for s in tree.body if s not in future])
    if body and isinstance(body[-1], ast.Expr):
        body[-1] = _located(ast.Return(value=body[-1].value), body[-1])
    first = body[0] if body else None
    if names:
        body.insert(0, _located(ast.Global(names=sorted(names)), first))
    if not body:
        body = [_located(ast.Pass(), None)]
    kind = ast.AsyncFunctionDef if state["async"] else ast.FunctionDef
    extra = {"type_params": []} if "type_params" in kind._fields else {}
    fn = kind(name="<module>", args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                  kw_defaults=[], kwarg=None, defaults=[]),
              body=body, decorator_list=[], returns=None, **extra)
    _located(fn, None)
    module = ast.Module(body=future + [fn], type_ignores=[])
    return module, state["async"]


def _syntax_error(msg, node):
    e = SyntaxError(msg)
    e.lineno, e.offset = node.lineno, node.col_offset + 1
    return e


def _star_importer(namespace, check):
    def star_import(module, level):
        importlib = _std("importlib")

        if check is not None:
            check(module, level)
        if level:
            raise ImportError("attempted relative import with no known parent package")
        m = importlib.import_module(module)
        public = getattr(m, "__all__", None)
        if public is None:
            public = [k for k in vars(m) if not k.startswith("_")]
        for k in public:
            namespace[k] = getattr(m, k)

    return star_import


def _python_reports(e, tb):
    """Has Python print e with traceback tb, as it prints an uncaught
    exception, and reports whether it could: only when the program's source
    came from a file (_SOURCE), whose lines it reads there, and no other
    thread runs. That costs no import, where the traceback module's
    (linecache's, tokenize's, re's) costs a run about 5 ms."""
    import _thread
    import os

    if _SOURCE is None or _thread._count():
        # Another thread of the program's, still running, would see the
        # working directory change under it.
        return False
    try:
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        cwd = None
    try:
        # The program's frames name its file as the program knows it; the
        # lines are read from where the runner read them, never from a
        # file of that name the program left in the workspace.
        os.chdir(os.path.dirname(_SOURCE))
        e.__traceback__ = tb  # Python prints the exception's own
        sys.__excepthook__(type(e), e, tb)
        return True
    except BaseException:
        return False
    finally:
        if cwd is not None:
            try:
                os.fchdir(cwd)
            finally:
                os.close(cwd)


def _report_failure(e, filename, send, remember_source=None):
    """Prints the traceback without the runner's frames (before, between or
    after the program's: the tool client's, say), and sends the error
    record. remember_source, when given, puts the program's lines where
    the traceback module reads them."""
    import os

    line = 0
    if _SOURCE is not None and os.path.basename(_SOURCE) == filename:
        # The tracebacks themselves, pruned, for Python to print.
        try:
            for x in _chain(e):
                tbs = []
                tb = x.__traceback__
                while tb is not None:
                    tbs.append(tb)
                    tb = tb.tb_next
                kept = _program_frames(tbs, filename, lambda t: t.tb_frame.f_code.co_filename)
                for a, b in zip(kept, kept[1:] + [None]):
                    a.tb_next = b
                x.__traceback__ = kept[0] if kept else None
            tb = e.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == filename:
                    line = tb.tb_lineno
                tb = tb.tb_next
            printed = _python_reports(e, e.__traceback__)
        except BaseException:
            printed = False
        if printed:
            _send_failure(e, filename, line, send)
            return
        line = 0
    if remember_source is not None:
        remember_source()
    try:
        traceback = _std("traceback")

        te = traceback.TracebackException(type(e), e, e.__traceback__)
        for x in _chain(te):
            x.stack = traceback.StackSummary.from_list(_program_frames(list(x.stack), filename, lambda f: f.filename))
        for f in te.stack:
            if f.filename == filename:
                line = f.lineno
        sys.stderr.write("".join(te.format()))
    except BaseException:
        sys.stderr.write("%s\n" % type(e).__name__)
    _send_failure(e, filename, line, send)


def _chain(x):
    """x, an exception (or the traceback module's picture of one), and the
    causes and contexts it chains to, each once."""
    seen, todo = set(), [x]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        todo += (x.__context__, x.__cause__)


def _program_frames(frames, filename, file_of):
    """The frames of a traceback that a program's failure shows: none
    before the program's first (the runner's, asyncio's: how it was
    started, not what it did), and none of the runner's between or after
    the program's (the tool client's, say). file_of names a frame's file."""
    runner = _program_frames.__code__.co_filename
    first = next((i for i, f in enumerate(frames) if file_of(f) == filename), 0)
    return [f for f in frames[first:] if file_of(f) != runner]


def _send_failure(e, filename, line, send):
    """Sends the error record of the program's failure e, at line."""
    cls = type(e)
    name = cls.__qualname__ if cls.__module__ in ("builtins", "__main__") else "%s.%s" % (cls.__module__, cls.__qualname__)
    error = {"type": name, "message": _safe_str(e)[:4000], "filename": filename, "line": line,
             "memory": isinstance(e, MemoryError)}
    if isinstance(e, ModuleBlockedError):
        error["module_blocked"] = _safe_str(e.module)
        error["rule"] = _safe_str(e.rule)
    elif isinstance(e, PolicyBlockedError):
        error["policy_blocked"] = _safe_str(e.event)
        error["rule"] = _safe_str(e.rule)
    elif isinstance(e, ToolError) and isinstance(getattr(e, "envelope", None), dict):
        # The tool's own envelope: its code, whether a retry can help, its
        # hints, for the Result's error.
        error["tool_error"] = e.envelope
    send({"error": error})


def _safe_str(v):
    try:
        return str(v)
    except BaseException:
        return "<%s: str() failed>" % type(v).__name__


def _safe_repr(v):
    try:
        r = repr(v)
    except BaseException:
        r = "<%s: repr() failed>" % type(v).__name__
    return r if len(r) <= 10000 else r[:10000] + "…"


def _plain(v, path, depth, seen, warnings):
    """Returns v as plain JSON data. What JSON cannot hold becomes its repr(),
    with a warning that names where it was."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            _warn(warnings, "%s: float %r is not JSON; replaced by the string %r" % (path, v, repr(v)))
            return repr(v)
        return float(v)
    if depth > 100:
        _warn(warnings, "%s: nested deeper than 100 levels; replaced by its repr()" % path)
        return _safe_repr(v)
    if isinstance(v, (list, tuple, dict, set, frozenset)):
        if id(v) in seen:
            _warn(warnings, "%s: a reference cycle; replaced by its repr()" % path)
            return _safe_repr(v)
        seen.add(id(v))
        try:
            if isinstance(v, dict):
                out = {}
                for k, item in v.items():
                    # Keys as json.dumps would write them.
                    if isinstance(k, str):
                        key = k
                    elif k is None:
                        key = "null"
                    elif isinstance(k, bool):
                        key = "true" if k else "false"
                    elif isinstance(k, (int, float)):
                        key = repr(k)
                    else:
                        key = _safe_repr(k)
                        _warn(warnings, "%s: key %s is not a string; replaced by its repr()" % (path, key))
                    out[key] = _plain(item, "%s[%s]" % (path, _short(key)), depth + 1, seen, warnings)
                return out
            items = list(v)
            if isinstance(v, (set, frozenset)):
                try:
                    items = sorted(items)
                except TypeError:
                    pass
                _warn(warnings, "%s: a %s became a JSON array" % (path, type(v).__name__))
            return [_plain(x, "%s[%d]" % (path, i), depth + 1, seen, warnings) for i, x in enumerate(items)]
        finally:
            seen.discard(id(v))
    tolist = getattr(v, "tolist", None)  # numpy arrays and scalars, array.array
    if callable(tolist) and not isinstance(v, type):
        try:
            return _plain(tolist(), path, depth + 1, seen, warnings)
        except Exception:
            pass
    r = _safe_repr(v)
    _warn(warnings, "%s: %s is not JSON; replaced by its repr()" % (path, type(v).__name__))
    return r


class _Costly(Exception):
    """_dumps gave up: json's own encoder is the faster for this much."""


# The escapes json.dumps(ensure_ascii=False) writes in a string: the two
# characters JSON reserves, and the control characters.
_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"})


def _dumps(v):
    """v, plain data (_plain's, or a record the runner built), as
    json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",",
    ":")) writes it, without importing json: with re, which it imports,
    that costs a run about 5 ms, more than encoding a small value here.
    Raises _Costly past about a millisecond of work, and TypeError or
    ValueError for what is not plain data: the caller then asks json."""
    budget = [100000]  # in tens of nanoseconds, roughly

    def enc(v):
        budget[0] -= 20
        if budget[0] < 0:
            raise _Costly
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, str):
            v = str.__str__(v)  # a subclass's own methods never run
            budget[0] -= len(v) // 10
            if v.isprintable() and '"' not in v and "\\" not in v:
                return '"' + v + '"'
            budget[0] -= 4 * len(v)
            if budget[0] < 0:
                raise _Costly
            return '"' + v.translate(_ESCAPES) + '"'
        if isinstance(v, int):
            return int.__repr__(v)
        if isinstance(v, float):
            if v != v or v in (_INF, -_INF):
                raise ValueError("Out of range float values are not JSON compliant")
            return float.__repr__(v)
        if type(v) is list:
            return "[" + ",".join([enc(x) for x in v]) + "]"
        if type(v) is dict:
            items = []
            for k, x in v.items():
                if type(k) is not str:
                    raise TypeError("keys must be str")
                items.append(enc(k) + ":" + enc(x))
            return "{" + ",".join(items) + "}"
        raise TypeError("Object of type %s is not plain data" % type(v).__name__)

    return enc(v)


_INF = float("inf")


def _short(key):
    return key if len(key) <= 40 else key[:40] + "…"


def _warn(warnings, msg):
    if len(warnings) < 10:
        warnings.append(msg)
    elif len(warnings) == 10:
        warnings.append("more parts of the value were not JSON")


# BEGIN GUARD: the guardrails, from here to END GUARD. Only a program run
# under a policy needs them, so lang/pycompile.go compiles them apart from
# the rest, and _load_guard loads them then: the runner every other program
# loads stays small.


def _category_modules():
    """The modules each guardrail category blocks; a module blocks its
    submodules too."""
    return {
        "network": ("urllib.request", "http.client", "http.server", "http.cookiejar", "requests", "httpx",
                    "aiohttp", "urllib3", "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib",
                    "xmlrpc", "websocket", "websockets", "paramiko", "socketserver", "wsgiref"),
        "low_level_network": ("socket", "ssl", "_socket", "_ssl", "asyncore", "asynchat"),
        "process": ("subprocess", "multiprocessing", "pty", "concurrent.futures.process", "_posixsubprocess"),
        "filesystem": ("shutil", "pathlib", "tempfile", "glob", "fileinput", "filecmp"),
        "module_loading": ("importlib", "imp", "runpy", "pkgutil", "zipimport", "modulefinder"),
        # ctypes and cffi run arbitrary native code.
        "dynamic_eval": ("code", "codeop", "ctypes", "cffi"),
    }


# What each category refuses, and what to do instead, for a model that will
# write the program again.
_CATEGORY_TEXT = {
    "network": ("network access",
                "Call the host's tools with call_tool instead: the sandbox has no network."),
    "low_level_network": ("sockets",
                          "Call the host's tools with call_tool instead: the sandbox has no network."),
    "process": ("starting or signalling processes",
                "Do the work in this program, or call the host's tools with call_tool: "
                "starting or signalling processes is refused."),
    "filesystem": ("file access",
                   "Keep data in memory and return results as the program's value, or read and write "
                   "files through the host's tools with call_tool."),
    "module_loading": ("loading modules by computed names",
                       "Import each module with an import statement that names it."),
    "dynamic_eval": ("running code built at run time",
                     "Write the code itself instead of building it from strings, and call functions and "
                     "read attributes by their own names."),
}


def _module_in(module, modules):
    for m in modules:
        if module == m or module.startswith(m) and module[len(m)] == ".":
            return True
    return False


class _Policy:
    """The runner's view of a guardrail policy, read from the lines
    guard.Policy.RunnerFile writes."""

    def __init__(self, text):
        self.block = set()
        self.allowed = None  # None: any module not blocked
        self.blocked = []
        for line in text.splitlines():
            key, _, value = line.strip().partition(" ")
            value = value.strip()
            if key == "block" and value:
                self.block.add(value)
            elif key == "allow_imports":
                self.allowed = self.allowed or []
            elif key == "allow_import" and value:
                self.allowed = (self.allowed or []) + [value]
            elif key == "block_import" and value:
                self.blocked.append(value)
        modules = _category_modules()
        self.category_modules = [(c, modules[c]) for c in sorted(self.block) if c in modules]

    def checks_imports(self):
        return self.allowed is not None or bool(self.blocked) or bool(self.category_modules)

    def refusal(self, module, parents=False):
        """Returns (rule, category) when the policy refuses importing module,
        else None. With parents, a package that holds an allowed module is
        allowed too: importing a.b imports a first."""
        if module == "__future__":
            return None
        if _module_in(module, self.blocked):
            return "imports.blocked", ""
        if self.allowed is not None and not _module_in(module, self.allowed):
            if not (parents and any(m.startswith(module + ".") for m in self.allowed)):
                return "imports.not_allowed", ""
        for category, modules in self.category_modules:
            if _module_in(module, modules):
                return category + ".import", category
        return None

    def refusal_from(self, module, names):
        """Returns (module refused, rule, category) for `from module import
        names` (`import module` when names is empty), else None. A name may
        be a submodule, which is checked too."""
        names = [n for n in names or () if isinstance(n, str) and n != "*"]
        r = self.refusal(module)
        if r is not None and r[0] == "imports.not_allowed" and names and \
                all(self.refusal(module + "." + n) is None for n in names):
            r = None  # from a import b, with a.b allowed
        if r is not None:
            return (module,) + r
        for n in names:
            r = self.refusal(module + "." + n)
            if r is not None and r[0] != "imports.not_allowed":
                return (module + "." + n,) + r
        return None

    def explain(self, module, rule, category):
        """Returns (message, hint) for a refused import."""
        if rule == "imports.relative":
            return ("relative import (from %s import ...): this policy allows only the modules it names" % module,
                    "Import the allowed modules by their full names: %s." % self._allowed_text())
        if rule == "imports.blocked":
            return ("import of %s: this policy refuses that module" % module,
                    "Do without %s: use the modules the policy allows." % module)
        if rule == "imports.not_allowed":
            return ("import of %s: this policy allows only %s" % (module, self._allowed_text()),
                    "Use only the allowed modules: %s." % self._allowed_text())
        what, hint = _CATEGORY_TEXT.get(category, (category, ""))
        return "import of %s: this policy refuses %s" % (module, what), hint

    def _allowed_text(self):
        return ", ".join(self.allowed) if self.allowed else "none (write the program without imports)"

    def blocked_error(self, module, rule, category):
        message, hint = self.explain(module, rule, category)
        return ModuleBlockedError("%s [rule %s]. %s" % (message, rule, hint), module, rule)


def _install_import_guard(policy, program, hooks, workspace):
    """Makes the imports the program's own code makes obey the policy, at
    run time: a module named in a string built at run time, or one the
    static pass could not see, is refused with ModuleBlockedError, an
    ImportError the program can catch. Three hooks, because each misses
    what another sees: builtins.__import__ (every import statement, and
    modules already loaded), importlib.import_module (which bypasses
    __import__), and the sys.meta_path finder (any other way to load a
    module not loaded yet). The standard library's and packages' own
    imports pass: a module the program may import may itself import what
    the program may not (json imports re; asyncio imports socket).

    Whose import it is: for the two wrappers, their caller's; for the
    finder, the caller of the wrapper the import entered by, else the first
    frame outside the import machinery (importlib's bootstrap and
    importlib/__init__). That frame is the program's when it runs in the
    program's globals, in a file under the workspace (modules the program
    wrote), or in code compiled from a string (not a file path); the
    runner's own frames, the import machinery's, frozen modules' and files
    outside the workspace are not.

    What this cannot stop: modules reached through objects already loaded
    (os.sys, a library's attribute that is a module, sys.modules), modules
    a library imports on the program's behalf (os.popen imports
    subprocess), code loaded by file path (importlib.util), code the program
    compiles itself under a file name outside the workspace, and a program
    that undoes the hooks (builtins.__import__, sys.meta_path, or
    introspection that reaches the runner). With module_loading and
    dynamic_eval blocked, the static pass refuses several of these ways
    (sys.modules, sys.meta_path, importlib, compile, introspection), not
    all: the sandbox stays the boundary.

    Returns the check for `from M import *`, which the runner performs on
    the program's behalf."""
    import _imp
    import builtins
    import importlib
    import importlib.util

    runner = globals()
    # importlib.util's find_spec and module_from_spec are the machinery
    # too: a module found or made through them is its caller's import.
    machinery = {"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
                 importlib.import_module.__code__.co_filename, importlib.util.find_spec.__code__.co_filename}
    workspace_prefix = workspace.rstrip("/") + "/"
    if workspace_prefix == "/":
        workspace_prefix = None
    verdicts = {}  # co_filename -> whether code from that file is the program's
    entries = set()  # id()s of the code of the hooks an import enters by
    finder = id(_ImportHooks.find_spec.__code__)

    def programs(f):
        """Whether the frame f, which imports, is the program's."""
        code = f.f_code
        name = code.co_filename
        if name in machinery:
            return False  # the import system's own imports
        g = f.f_globals
        if g is program:
            return True
        if g is runner:
            return False
        v = verdicts.get(name)
        if v is None:
            if name.startswith("<frozen "):
                v = False
            elif name.startswith("/"):
                v = workspace_prefix is not None and name.startswith(workspace_prefix)
            else:
                v = True
            verdicts[name] = v
        return v

    def importer(f):
        """The frame that made the import the finder is asked about: the
        caller of the hook it entered by, else the first frame outside the
        import machinery."""
        while f is not None:
            code = f.f_code
            if id(code) in entries:
                return f.f_back
            if id(code) != finder and code.co_filename not in machinery:
                return f
            f = f.f_back
        return None

    def refuse(name, package, fromlist, level):
        if level:
            parts = package.rsplit(".", level - 1) if isinstance(package, str) and package else []
            if len(parts) < level:
                # Unresolvable: the import itself fails, unless an
                # allow-list refuses it first.
                if policy.allowed is not None:
                    raise policy.blocked_error("." * level + name, "imports.relative", "")
                return
            name = parts[0] + "." + name if name else parts[0]
        r = policy.refusal_from(name, fromlist)
        if r is not None:
            raise policy.blocked_error(*r)

    real_import = builtins.__import__
    real_import_module = importlib.import_module

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if programs(sys._getframe(1)):
            package = globals.get("__package__") if isinstance(globals, dict) else None
            refuse(name, package, fromlist, level)
        return real_import(name, globals, locals, fromlist, level)

    def import_module(name, package=None):
        if isinstance(name, str) and programs(sys._getframe(1)):
            level = len(name) - len(name.lstrip("."))
            refuse(name[level:], package, (), level)
        return real_import_module(name, package)

    def check_finding(name):
        f = importer(sys._getframe(1))
        if f is not None and programs(f):
            r = policy.refusal(name, parents=True)
            if r is not None:
                raise policy.blocked_error(name, *r)

    def check_star(module, level):
        refuse(module, None, ("*",), level)

    # A built-in or extension module can be made from a spec without any
    # finder being asked (importlib.machinery.BuiltinImporter.find_spec,
    # then importlib.util.module_from_spec): every loader makes one through
    # _imp, so the check is there too. _posixsubprocess, made so, starts
    # processes with no audit event.
    real_create_builtin, real_create_dynamic = _imp.create_builtin, _imp.create_dynamic

    def create_builtin(spec, *args):
        check_made(spec, sys._getframe(1))
        return real_create_builtin(spec, *args)

    def create_dynamic(spec, *args):
        check_made(spec, sys._getframe(1))
        return real_create_dynamic(spec, *args)

    def check_made(spec, f):
        name = getattr(spec, "name", None)
        f = importer(f)
        if isinstance(name, str) and f is not None and programs(f):
            r = policy.refusal(name, parents=True)
            if r is not None:
                raise policy.blocked_error(name, *r)

    for fn, real in ((guarded_import, real_import), (import_module, real_import_module)):
        fn.__name__, fn.__qualname__, fn.__doc__ = real.__name__, real.__qualname__, real.__doc__
        fn.__wrapped__ = real
        entries.add(id(fn.__code__))
    for fn, real in ((create_builtin, real_create_builtin), (create_dynamic, real_create_dynamic)):
        fn.__name__, fn.__qualname__, fn.__doc__ = real.__name__, real.__qualname__, real.__doc__
    builtins.__import__ = guarded_import
    importlib.import_module = import_module
    _imp.create_builtin, _imp.create_dynamic = create_builtin, create_dynamic
    hooks.check = check_finding
    return check_star


# Audit events (PEP 578) each category refuses at run time.
_AUDIT_EVENTS = {
    "process": ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                "os.forkpty", "os.kill", "os.killpg", "os.startfile", "pty.spawn", "builtins.breakpoint"),
    "dynamic_eval": ("pickle.find_class", "marshal.loads", "marshal.load", "builtins.breakpoint", "code.__new__"),
    "filesystem": ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod", "os.chown",
                   "os.symlink", "os.link", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move"),
}

# The modules of Python's own that build code at run time as part of what
# they do (a dataclass's __init__, a namedtuple's __new__): their compiling
# is theirs, not the program's.
_CODE_BUILDERS = ("dataclasses", "collections", "typing", "enum", "functools", "string", "re", "json",
                  "warnings", "inspect", "abc", "contextlib", "ast", "importlib", "asyncio")


def _install_audit_hook(policy, filename):
    """Refuses, when it happens, what the policy's categories refuse: the
    audit events Python raises for starting processes, opening sockets,
    running code built from strings, loading pickles and marshal data,
    writing files, and loading native code (ctypes, whatever is blocked).
    The static checks turn away what they can see; this holds for what
    they cannot (a name reached by getattr, a star import, a pickle). The
    hook cannot be removed. Raises PolicyBlockedError in the code that did
    it, which the program may catch."""
    import os

    blocked = set(policy.block)
    refused = {}
    for category in sorted(blocked):
        for event in _AUDIT_EVENTS.get(category, ()):
            refused.setdefault(event, category)
    network = "network" in blocked or "low_level_network" in blocked
    unix_family = 1  # AF_UNIX, without importing socket for it
    stdlib = os.path.dirname(os.__file__) if getattr(os, "__file__", None) else None
    runner_file = _install_audit_hook.__code__.co_filename

    def builder(f, event):
        """Whether the frame is one of Python's own code builders. typing
        compiles a string annotation into a forward reference, which runs
        nothing; evaluating one (typing.get_type_hints) runs the program's
        string, which is the program's own eval."""
        name = f.f_globals.get("__name__", "") if f is not None else ""
        if not isinstance(name, str) or f.f_code.co_filename == filename:
            return False
        root = name.split(".")[0]
        if root == "typing":
            return event == "compile"
        return root in _CODE_BUILDERS

    def machinery(f):
        """Whether the frame is the import system's: loading a module's code
        is governed by the import guard, not here."""
        return f is not None and f.f_code.co_filename.startswith("<frozen importlib")

    def runners(f):
        """Whether the runner, not the program, is behind what the frame
        does: the first of the two found up the stack decides. Code with
        neither below it (a thread the program started) is the program's."""
        while f is not None:
            name = f.f_code.co_filename
            if name == runner_file:
                return True
            if name == filename:
                return False
            f = f.f_back
        return False

    def refuse(event, category):
        what, hint = _CATEGORY_TEXT.get(category, (category, ""))
        raise PolicyBlockedError("%s: this policy refuses %s [rule %s.runtime, event %s]. %s" % (
            event, what, category, event, hint), event, category + ".runtime")

    def category_of(event, args):
        """The category that refuses the event, else None."""
        category = refused.get(event)
        if category is not None:
            return category
        if event.startswith("ctypes.") and blocked:
            return "dynamic_eval" if "dynamic_eval" in blocked else sorted(blocked)[0]
        if network and event.startswith("socket."):
            if event == "socket.__new__":
                family = args[1] if len(args) > 1 else None
                if family == unix_family or family == -1:
                    return None  # local pairs: asyncio's own wake-up socket
            elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
                addr = args[1] if len(args) > 1 else None
                if isinstance(addr, (str, bytes)):
                    return None  # a path: a unix socket
            elif event not in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                               "socket.gethostbyname_ex", "socket.getnameinfo"):
                return None
            return "low_level_network" if "low_level_network" in blocked else "network"
        if "dynamic_eval" in blocked and event in ("compile", "exec"):
            code = args[0] if args else None
            name = args[1] if event == "compile" and len(args) > 1 else getattr(code, "co_filename", "")
            if isinstance(name, bytes):
                name = name.decode("utf-8", "replace")
            if isinstance(name, str) and name.startswith("<"):
                return "dynamic_eval"  # code from a string, not from a file
            return None
        if "filesystem" in blocked and event == "open":
            mode = args[1] if len(args) > 1 else "r"
            flags = args[2] if len(args) > 2 else 0
            if (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                    (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)):
                return "filesystem"
        return None

    def hook(event, args):
        category = category_of(event, args)
        if category is None:
            return
        f = sys._getframe(1)
        if event in ("compile", "exec", "marshal.loads", "marshal.load") and (machinery(f) or builder(f, event)):
            return
        if runners(f):
            return
        refuse(event, category)

    sys.addaudithook(hook)


def _guard_findings(ast, tree, src, policy):
    """Walks the program's syntax tree and returns what the policy refuses,
    as guard.Finding's JSON: the imports the lists and categories refuse,
    and the calls, attributes and names of the blocked categories. Names
    are followed through simple aliases (import os as o; from os import
    system as s; x = os.system), scope by scope. Sorted by position, at most
    50."""
    if policy is None:
        return []
    found = {}
    lines = None

    def add(node, rule, category, message, hint):
        nonlocal lines
        line = getattr(node, "lineno", None) or 1
        col = getattr(node, "col_offset", None) or 0
        if col:
            # ast counts UTF-8 bytes; a reader counts characters.
            if lines is None:
                lines = src.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            if line <= len(lines) and not lines[line - 1].isascii():
                col = len(lines[line - 1].encode("utf-8", "surrogateescape")[:col].decode("utf-8", "ignore"))
        f = {"rule": rule, "line": line, "column": col + 1, "message": message, "hint": hint}
        if category:
            f["category"] = category
        found.setdefault((line, col + 1, rule), f)

    # Pass 1: scopes and what each binds.
    class Scope:
        __slots__ = ("kind", "parent", "bound", "values", "globals")

        def __init__(self, kind, parent):
            self.kind, self.parent = kind, parent
            self.bound, self.values, self.globals = set(), {}, set()

    root = Scope("module", None)
    scopes = [root]
    modules = {"builtins"}  # names known to be modules
    nodes = []

    def new_scope(kind, parent):
        s = Scope(kind, parent)
        scopes.append(s)
        return s

    def declare(scope, name, value=None, value_scope=None):
        scope.bound.add(name)
        if value is not None:
            scope.values.setdefault(name, []).append((value, value_scope))

    def bind(scope, target, value, value_scope):
        t = type(target)
        if t is ast.Name:
            declare(scope, target.id, value, value_scope)
        elif t is ast.Tuple or t is ast.List:
            pair = type(value) in (ast.Tuple, ast.List) and len(value.elts) == len(target.elts) and \
                not any(type(e) is ast.Starred for e in target.elts + value.elts)
            for i, e in enumerate(target.elts):
                bind(scope, e, value.elts[i] if pair else None, value_scope)
        elif t is ast.Starred:
            bind(scope, target.value, None, None)

    def bind_args(inner, args, outer):
        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        for a, d in zip(positional, defaults):
            declare(inner, a.arg, d, outer)
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            declare(inner, a.arg, d, outer)
        for a in (args.vararg, args.kwarg):
            if a is not None:
                declare(inner, a.arg)

    def push_args(args, scope, stack):
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            stack.append((d, scope))
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                stack.append((a.annotation, scope))

    comprehensions = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
    stack = [(tree, root)]
    while stack:
        n, scope = stack.pop()
        nodes.append((n, scope))
        t = type(n)
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
            if t is not ast.Lambda:
                declare(scope, n.name)
                stack.extend((d, scope) for d in n.decorator_list)
                if n.returns is not None:
                    stack.append((n.returns, scope))
            push_args(n.args, scope, stack)
            inner = new_scope("function", scope)
            bind_args(inner, n.args, scope)
            if t is ast.Lambda:
                stack.append((n.body, inner))
            else:
                stack.extend((s, inner) for s in n.body)
            continue
        if t is ast.ClassDef:
            declare(scope, n.name)
            stack.extend((d, scope) for d in n.decorator_list + n.bases + n.keywords)
            inner = new_scope("class", scope)
            stack.extend((s, inner) for s in n.body)
            continue
        if t in comprehensions:
            inner = new_scope("comprehension", scope)
            for i, g in enumerate(n.generators):
                bind(inner, g.target, None, None)
                stack.append((g.target, inner))
                stack.append((g.iter, scope if i == 0 else inner))
                stack.extend((c, inner) for c in g.ifs)
            for part in ("elt", "key", "value"):
                v = getattr(n, part, None)
                if v is not None:
                    stack.append((v, inner))
            continue
        if t is ast.Import:
            for a in n.names:
                if a.asname:
                    declare(scope, a.asname, ("name", a.name))
                else:
                    top = a.name.split(".")[0]
                    declare(scope, top, ("name", top))
                parts = a.name.split(".")
                modules.update(".".join(parts[:i + 1]) for i in range(len(parts)))
        elif t is ast.ImportFrom:
            for a in n.names:
                if a.name != "*":
                    declare(scope, a.asname or a.name,
                            ("name", n.module + "." + a.name) if n.module and not n.level else None)
        elif t is ast.Assign:
            for target in n.targets:
                bind(scope, target, n.value, scope)
        elif t is ast.AnnAssign or t is ast.AugAssign:
            bind(scope, n.target, n.value if t is ast.AnnAssign else None, scope)
        elif t is ast.NamedExpr:
            s = scope
            while s.kind == "comprehension":
                s = s.parent
            bind(s, n.target, n.value, scope)
        elif t is ast.For or t is ast.AsyncFor:
            bind(scope, n.target, None, None)
        elif t is ast.withitem:
            if n.optional_vars is not None:
                bind(scope, n.optional_vars, None, None)
        elif t is ast.ExceptHandler:
            if n.name:
                declare(scope, n.name)
        elif t is ast.Global:
            scope.globals.update(n.names)
        elif getattr(n, "name", None) and t.__name__ in ("MatchAs", "MatchStar"):
            declare(scope, n.name)
        elif getattr(n, "rest", None) and t.__name__ == "MatchMapping":
            declare(scope, n.rest)
        stack.extend((c, scope) for c in _children(ast, n))
    # `global x` in a function: its bindings of x are the module's.
    for s in scopes:
        for name in s.globals:
            if s is not root and name in s.bound:
                s.bound.discard(name)
                root.bound.add(name)
                root.values.setdefault(name, []).extend(s.values.pop(name, ()))

    # Pass 2: what each name and expression refers to.
    def defining_scope(scope, name):
        if name in scope.globals:
            return root if name in root.bound else None
        s, first = scope, True
        while s is not None:
            # A class body's names are not visible in its methods.
            if (first or s.kind != "class") and name in s.bound:
                return s
            first = False
            s = s.parent
        return None

    def normalize(q):
        head, dot, rest = q.partition(".")
        if head in ("posix", "nt"):
            return "os" + dot + rest
        if head == "_io":
            return "io" + dot + rest
        return q

    def resolve(n, scope, depth=0):
        """Returns the dotted name n refers to ("os.system",
        "builtins.eval"), or None."""
        attrs = []
        while type(n) is ast.Attribute:
            attrs.append(n.attr)
            n = n.value
        t = type(n)
        q = None
        if depth > 30:
            return None
        if t is ast.Name:
            d = defining_scope(scope, n.id)
            if d is None:
                q = "builtins" if n.id == "__builtins__" else "builtins." + n.id
            else:
                for value, value_scope in d.values.get(n.id, ()):
                    if type(value) is tuple:
                        q = value[1]
                    else:
                        q = resolve(value, value_scope, depth + 1)
                    if q is not None:
                        break
        elif t is ast.Call:
            f = resolve(n.func, scope, depth + 1)
            if f == "builtins.getattr" and len(n.args) >= 2 and type(n.args[1]) is ast.Constant and \
                    type(n.args[1].value) is str:
                base = resolve(n.args[0], scope, depth + 1)
                if base is not None:
                    q = base + "." + n.args[1].value
            elif f in ("builtins.__import__", "importlib.import_module") and n.args and \
                    type(n.args[0]) is ast.Constant and type(n.args[0].value) is str and \
                    not n.args[0].value.startswith("."):
                name = n.args[0].value
                q = name if f == "importlib.import_module" or len(n.args) >= 4 else name.split(".")[0]
        if q is None:
            return None
        for a in reversed(attrs):
            q += "." + a
        return normalize(q)

    refs = {}

    def ref_rule(category, what, description, *names):
        for name in names:
            refs[name] = (category + "." + what, category, description)

    ref_rule("process", "system", "runs a shell command", "os.system")
    ref_rule("process", "popen", "runs a shell command", "os.popen")
    ref_rule("process", "fork", "starts a process", "os.fork", "os.forkpty")
    ref_rule("process", "kill", "signals a process", "os.kill", "os.killpg")
    for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"):
        ref_rule("process", "exec", "replaces the process with another program", "os.exec" + s)
        ref_rule("process", "spawn", "starts a process", "os.spawn" + s)
    ref_rule("process", "spawn", "starts a process", "os.posix_spawn", "os.posix_spawnp")
    ref_rule("process", "startfile", "starts a program", "os.startfile")
    ref_rule("process", "pool", "starts worker processes", "concurrent.futures.ProcessPoolExecutor")
    ref_rule("filesystem", "open", "opens a file", "builtins.open", "io.open", "os.open", "codecs.open")
    ref_rule("filesystem", "remove", "deletes files or directories",
             "os.remove", "os.unlink", "os.rmdir", "os.removedirs")
    ref_rule("filesystem", "rename", "moves files", "os.rename", "os.replace", "os.renames")
    ref_rule("filesystem", "mkdir", "creates directories", "os.mkdir", "os.makedirs")
    ref_rule("filesystem", "chmod", "changes a file's permissions or owner", "os.chmod", "os.chown", "os.lchown")
    ref_rule("filesystem", "link", "creates links", "os.link", "os.symlink")
    ref_rule("filesystem", "truncate", "truncates a file", "os.truncate")
    ref_rule("filesystem", "listdir", "lists directories", "os.listdir", "os.scandir", "os.walk")
    ref_rule("module_loading", "__import__", "imports a module by a name given at run time", "builtins.__import__")
    ref_rule("module_loading", "import_module", "imports a module by a name given at run time",
             "importlib.import_module")
    ref_rule("module_loading", "sys_modules", "reaches loaded modules by name", "sys.modules")
    ref_rule("module_loading", "import_system", "changes how modules are found",
             "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache")
    ref_rule("dynamic_eval", "eval", "runs code built from a string", "builtins.eval")
    ref_rule("dynamic_eval", "exec", "runs code built from a string", "builtins.exec")
    ref_rule("dynamic_eval", "compile", "compiles code built from a string", "builtins.compile")
    ref_rule("dynamic_eval", "vars", "reaches a namespace by computed names", "builtins.vars")
    ref_rule("dynamic_eval", "deserialize", "runs whatever code the data names",
             "pickle.loads", "pickle.load", "pickle.Unpickler", "_pickle.loads", "_pickle.load",
             "marshal.loads", "marshal.load", "shelve.open", "dill.loads", "dill.load")
    ref_rule("dynamic_eval", "breakpoint", "opens a debugger that runs any code typed into it",
             "builtins.breakpoint", "pdb.set_trace", "pdb.run", "pdb.runcall")
    ref_rule("dynamic_eval", "attrgetter", "reaches attributes by names given as data",
             "operator.attrgetter", "operator.methodcaller")
    introspection = {"__subclasses__", "__globals__", "__code__", "__closure__", "f_globals", "f_locals",
                     "f_builtins", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "__mro__", "__builtins__",
                     "__getattribute__", "__getattr__", "__reduce__", "__reduce_ex__"}
    # getattr and the like, passed as a value (to map, reduce, a key): they
    # then reach attributes by names no call site shows.
    attr_functions = ("builtins.getattr", "builtins.setattr", "builtins.delattr")
    callees = {id(c.func) for c, _ in nodes if type(c) is ast.Call}
    path_mutators = {"append", "insert", "extend", "remove", "pop", "clear", "reverse", "sort",
                     "__setitem__", "__delitem__", "__iadd__"}
    namespace_methods = {"get", "setdefault", "update", "pop", "__getitem__", "__setitem__"}
    category_modules = {m: c for c, ms in _category_modules().items() if c in policy.block for m in ms}
    blocked = policy.block

    def text(n):
        """A short rendering of an expression, for messages."""
        parts = []  # from the outermost
        while True:
            t = type(n)
            if t is ast.Attribute:
                parts.append("." + n.attr)
                n = n.value
            elif t is ast.Call:
                parts.append("(...)")
                n = n.func
            else:
                parts.append(n.id if t is ast.Name else "...")
                break
        if len(parts) > 6:
            return "…" + "".join(reversed(parts[:5]))
        return "".join(reversed(parts))

    def shown(q, n):
        short = q[len("builtins."):] if q.startswith("builtins.") else q
        written = text(n) if n is not None else short
        return written if written == short else "%s (%s)" % (written, short)

    def flag(n, category, what, message):
        if category in blocked:
            add(n, category + "." + what, category,
                "%s, and this policy refuses %s" % (message, _CATEGORY_TEXT[category][0]),
                _CATEGORY_TEXT[category][1])

    def reference(q, n, written=None):
        r = refs.get(q)
        if r is not None:
            rule, category, description = r
            if category in blocked:
                add(n, rule, category,
                    "%s %s, and this policy refuses %s" % (
                        written or shown(q, n), description, _CATEGORY_TEXT[category][0]),
                    _CATEGORY_TEXT[category][1])

    def module_import(module, names, n, name_nodes):
        r = policy.refusal_from(module, names)
        if r is None:
            return
        refused, rule, category = r
        where = n
        if refused != module:
            where = name_nodes.get(refused[len(module) + 1:], n)
        message, hint = policy.explain(refused, rule, category)
        add(where, rule, category, message, hint)

    def namespace_call(n, scope):
        """globals() or locals(), as the call n."""
        if type(n) is ast.Call:
            f = resolve(n.func, scope)
            if f in ("builtins.globals", "builtins.locals"):
                return f[len("builtins."):]
        return None

    def path_target(target, scope):
        if type(target) is ast.Subscript:
            target = target.value
        return resolve(target, scope) == "sys.path"

    check_imports = policy.checks_imports()
    # Imports inside a try whose handlers catch ImportError: the program
    # is ready to do without the module, so the refusal is left to the
    # import hook at run time, which raises the ImportError it catches.
    catching = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}

    def catches_import_error(handler):
        t = handler.type
        if t is None:
            return True
        for e in (t.elts if type(t) is ast.Tuple else [t]):
            name = e.attr if type(e) is ast.Attribute else getattr(e, "id", None)
            if name in catching:
                return True
        return False

    tolerated = set()
    try_types = tuple(getattr(ast, k) for k in ("Try", "TryStar") if hasattr(ast, k))
    for n, _ in nodes:
        if isinstance(n, try_types) and any(catches_import_error(h) for h in n.handlers):
            pending = list(n.body)
            while pending:
                m = pending.pop()
                if type(m) in (ast.Import, ast.ImportFrom):
                    tolerated.add(id(m))
                if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
                    continue  # runs later, outside the try
                pending.extend(_children(ast, m))
    for n, scope in nodes:
        t = type(n)
        if t is ast.Name:
            if type(n.ctx) is ast.Load:
                q = resolve(n, scope)
                if q is not None:
                    reference(q, n)
                    if q in attr_functions and id(n) not in callees:
                        flag(n, "dynamic_eval", "getattr_value",
                             "%s passed as a value reaches attributes by computed names" % n.id)
        elif t is ast.Attribute:
            if n.attr in introspection:
                flag(n, "dynamic_eval", "introspection",
                     "%s reaches an object's internals (%s)" % (text(n), n.attr))
            q = resolve(n, scope)
            if q is not None:
                reference(q, n)
                category = category_modules.get(q)
                # A module imported by name is found at its import.
                if category is not None and q not in modules:
                    flag(n, category, "import", "%s is the module %s" % (text(n), q))
            if n.attr == "__dict__":
                base = resolve(n.value, scope)
                if base == "builtins":
                    flag(n, "dynamic_eval", "builtins", "%s reaches builtins by computed names" % text(n))
                elif base in modules:
                    flag(n, "dynamic_eval", "module_dict",
                         "%s reaches the module %s by computed names" % (text(n), base))
        elif t is ast.Subscript:
            if resolve(n.value, scope) == "builtins":
                flag(n, "dynamic_eval", "builtins", "%s[...] reaches builtins by computed names" % text(n.value))
            ns = namespace_call(n.value, scope)
            if ns is not None:
                flag(n, "dynamic_eval", ns, "%s()[...] reaches variables by computed names" % ns)
            if type(n.ctx) is not ast.Load and path_target(n, scope):
                flag(n, "module_loading", "sys_path", "changing sys.path changes where modules come from")
        elif t is ast.Call:
            f = resolve(n.func, scope)
            if f in ("builtins.getattr", "builtins.setattr", "builtins.delattr") and n.args:
                base = resolve(n.args[0], scope)
                name = n.args[1] if len(n.args) > 1 else None
                literal = type(name) is ast.Constant and type(name.value) is str
                fn = f[len("builtins."):]
                if base == "builtins":
                    flag(n, "dynamic_eval", fn, "%s() on builtins reaches them by computed names" % fn)
                elif base in modules and not literal:
                    flag(n, "dynamic_eval", fn,
                         "%s() on the module %s with a computed name reaches it by computed names" % (fn, base))
                if literal:
                    if name.value in introspection:
                        flag(n, "dynamic_eval", "introspection",
                             "%s reaches an object's internals (%s)" % (text(n.func) + "(...)", name.value))
                    if fn == "getattr":
                        q = resolve(n, scope)
                        if q is not None:
                            reference(q, n, "getattr(..., %r) (%s)" % (name.value, q))
            elif f in ("builtins.__import__", "importlib.import_module") and check_imports and n.args and \
                    type(n.args[0]) is ast.Constant and type(n.args[0].value) is str and \
                    not n.args[0].value.startswith("."):
                module_import(n.args[0].value, (), n, {})
            if type(n.func) is ast.Attribute:
                if n.func.attr in path_mutators and resolve(n.func.value, scope) == "sys.path":
                    flag(n, "module_loading", "sys_path", "changing sys.path changes where modules come from")
                ns = namespace_call(n.func.value, scope)
                if ns is not None and n.func.attr in namespace_methods:
                    flag(n, "dynamic_eval", ns, "%s().%s() reaches variables by computed names" % (ns, n.func.attr))
        elif t is ast.Assign or t is ast.AugAssign or t is ast.AnnAssign or t is ast.Delete:
            for target in n.targets if t is ast.Assign or t is ast.Delete else [n.target]:
                if type(target) is ast.Attribute and path_target(target, scope):
                    flag(target, "module_loading", "sys_path", "changing sys.path changes where modules come from")
        elif t is ast.Import:
            if check_imports and id(n) not in tolerated:
                for a in n.names:
                    module_import(a.name, (), a, {})
        elif t is ast.ImportFrom:
            if n.level:
                if policy.allowed is not None:
                    message, hint = policy.explain("." * n.level + (n.module or ""), "imports.relative", "")
                    add(n, "imports.relative", "", message, hint)
                continue
            names = {a.name: a for a in n.names}
            if check_imports and id(n) not in tolerated:
                module_import(n.module, list(names), n, names)
            for a in n.names:
                if a.name != "*":
                    q = normalize(n.module + "." + a.name)
                    reference(q, a, q)
                    continue
                # A star import brings in every public name of the module:
                # the ones the policy refuses among them, with no name
                # written where they are used.
                prefix = normalize(n.module) + "."
                for q in sorted(refs):
                    if q.startswith(prefix) and "." not in q[len(prefix):] and not q[len(prefix):].startswith("_") \
                            and refs[q][1] in blocked:
                        reference(q, a, "from %s import * (%s)" % (n.module, q))
                        break
    out = sorted(found.values(), key=lambda f: (f["line"], f["column"], f["rule"]))
    return out[:50]


# END GUARD


def _codecell_warm():
    """Started ahead of its job as `runner --warm FD`: the runner is loaded
    and nothing else. It says so with one byte on the result channel,
    reads its job from FD to its end, and runs it (_codecell_job)."""
    import _ast  # noqa: F401 (the runner's first import, cold or warm)
    import os

    fd = int(sys.argv[2])
    os.write(3, b"R")
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    _codecell_job(b"".join(chunks))


def _codecell_job(message):
    """Runs a job given as its message — the rest of the command this
    runner would have been started with and the job's environment,
    NUL-separated — as that command would have. Nothing of the job, the
    workspace or another job has reached this interpreter before."""
    import os

    parts = message.split(b"\0")
    if len(parts) < 2 or parts[0] != b"codecell-warm 1":
        sys.exit("codecell runner: the job did not come")
    n = int(parts[1])
    args, env = parts[2:2 + n], parts[2 + n:]
    os.environ.clear()
    for kv in env:
        k, _, v = kv.partition(b"=")
        if k:
            os.environb[k] = v
    sys.argv = [os.fsdecode(a) for a in args]
    _codecell_main()


def _codecell_template():
    """Loaded as __codecell_template__ by a fork server, which forks one
    child per job and calls _codecell_forked there: what every job would
    import is imported here, once, before any job — Python's own modules,
    never the workspace's. What only some jobs import (asyncio, for those
    that await) is not: every child copies the page tables of what the
    template holds and tears them down at its end, so the fork server
    imports those only in a template of their own (ForkStart.Preload)."""
    import _ast  # noqa: F401
    import json  # noqa: F401
    import linecache  # noqa: F401
    import threading  # noqa: F401
    import traceback  # noqa: F401

    _keep_json()
    # A program's traceback, and its Result's error, name these classes as
    # the runner run as a script does (ToolError: ...), not by this
    # module's name (__codecell_template__.ToolError: ...): the path a run
    # took is none of the program's business.
    for cls in (ToolError, ToolHandle, ModuleBlockedError, PolicyBlockedError):
        cls.__module__ = "__main__"


def _codecell_forked(message):
    """A fork server's child, in its own sandbox: runs the job, then ends."""
    _codecell_finish(lambda: _codecell_job(message))


def _codecell_live():
    """A live session's interpreter, started as `runner --live CONTROL_FD
    TOOL_FD WORKSPACE`: it runs cells, one at a time, in one __main__ that
    keeps what each leaves (variables, imports, functions, open objects).

    Each cell comes on the control socket as one line of JSON (id, code,
    filename, args, env, value_limit, token). The cell runs as a program
    would, under the same code-mode rules; what a program would write on
    its result channel is gathered, and after the cell the interpreter
    writes the token on stdout and stderr (so that the host knows where
    the cell's output ends) and answers "done ID STATUS LENGTH\n" followed
    by those LENGTH bytes. SystemExit ends the cell, not the interpreter.
    SIGINT interrupts a running cell (KeyboardInterrupt) and is ignored
    between cells."""
    import os
    import signal

    ctl_fd, tool_fd, workspace = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    policy_file = sys.argv[5] if len(sys.argv) > 5 else None
    for fd in (ctl_fd, tool_fd):
        os.set_inheritable(fd, False)
    in_cell = [False]

    def interrupt(signum, frame):
        if in_cell[0]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    # What every cell may need, loaded before the workspace joins the path.
    import _ast  # noqa: F401
    import asyncio  # noqa: F401
    import fcntl
    import json
    import linecache  # noqa: F401
    import pickle  # noqa: F401
    import socket
    import threading  # noqa: F401
    import traceback  # noqa: F401

    loads = json.loads
    _keep_json()
    sys.stdout.reconfigure(line_buffering=True)
    mod, hooks = _program_module(workspace, "main.py", _ToolChannel(tool_fd))
    policy = None
    if policy_file is not None:
        # The session's guardrails, at run time, for every cell: each cell
        # was checked against them (and its own) before it came.
        _load_guard(sys.argv[0])
        with open(policy_file, encoding="utf-8") as f:
            policy = _Policy(f.read())
    star_check = None
    if policy is not None and policy.checks_imports():
        star_check = _install_import_guard(policy, mod.__dict__, hooks, workspace)
    mod.__dict__["__codecell_star_import__"] = _star_importer(mod.__dict__, star_check)
    mod.__dict__["PolicyBlockedError"] = PolicyBlockedError
    sys.modules["__main__"] = mod
    _join_workspace(workspace)
    if policy is not None and policy.block:
        _install_audit_hook(policy, "main.py")
    base_env = dict(os.environb)
    # What the runner calls between cells, kept from before any: a cell
    # shares the interpreter, and may replace them for itself.
    os_write, os_readv, os_exit, recv_fds = os.write, os.readv, os._exit, socket.recv_fds
    environ, environb = os.environ, os.environb

    def write_all(fd, data):
        view = memoryview(data)
        while view:
            n = os_write(fd, view)
            view = view[n:]

    def answer(data):
        try:
            write_all(ctl_fd, data)
        except OSError as e:
            channel_gone(e)

    def channel_gone(e):
        try:
            os_write(2, b"codecell: the session's control channel failed (%s): a cell closed or replaced the interpreter's descriptors; "
                        b"the next cell starts a fresh interpreter\n" % str(e).encode())
        finally:
            os_exit(125)

    write_all(ctl_fd, b"ready\n")
    pending = b""
    # The runner's own descriptor of the control socket, above the low
    # numbers a cell may close or reuse (os.close(3), dup2 onto it, the
    # next file opened): the answers go there. One that closes it too
    # (os.closerange) ends the interpreter, which says why (channel_gone).
    # The socket also brings descriptors (a fork's socket for the state:
    # see _snapshot_child).
    try:
        own_fd = fcntl.fcntl(ctl_fd, fcntl.F_DUPFD_CLOEXEC, 512)
    except OSError:
        own_fd = os.dup(ctl_fd)
    ctl_sock = socket.socket(fileno=own_fd)
    given_fd, ctl_fd = ctl_fd, own_fd
    received = []
    while True:
        while b"\n" not in pending:
            try:
                chunk, fds, _, _ = recv_fds(ctl_sock, 1 << 16, 4)
            except OSError as e:
                channel_gone(e)
            received.extend(fds)
            if not chunk:
                os_exit(0)
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        req = loads(line)
        if req.get("snapshot"):
            # The state is taken by a copy of this process (fork: the
            # kernel copies pages only as either writes them), which
            # pickles and sends it on the socket that came with the
            # request while this one goes on.
            out_fd = received.pop(0) if received else -1
            for fd in received:
                os.close(fd)
            received.clear()
            if out_fd < 0:
                raw = _JSON.dumps({"error": "no socket came with the request"}).encode()
                answer(b"done %d 0 %d\n" % (int(req["id"]), len(raw)) + raw)
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    # A grandchild does the work: init, not this
                    # interpreter, reaps it.
                    if os.fork() == 0:
                        _snapshot_child(mod, int(req.get("max", 0)), out_fd, (given_fd, tool_fd, ctl_fd), write_all)
                finally:
                    os._exit(0)
            os.close(out_fd)
            os.waitpid(pid, 0)
            answer(b"done %d 0 0\n" % int(req["id"]))
            continue
        if "restore" in req:
            n = int(req["restore"])
            blob = bytearray(n)
            view, got = memoryview(blob), 0
            if pending:
                take = pending[:n]
                view[:len(take)] = take
                got, pending = len(take), pending[len(take):]
            while got < n:
                try:
                    k = os_readv(ctl_fd, [view[got:]])
                except OSError as e:
                    channel_gone(e)
                if not k:
                    os_exit(0)
                got += k
            in_cell[0] = True
            try:
                report = _restore(mod, blob)
            except BaseException as e:
                report = {"error": _safe_str(e)}
            finally:
                in_cell[0] = False
            del blob, view
            raw = _JSON.dumps(report).encode()
            answer(b"done %d 0 %d\n" % (int(req["id"]), len(raw)) + raw)
            continue
        if req.get("variables"):
            in_cell[0] = True
            try:
                raw = _JSON.dumps(_variables(mod, req.get("max", 1000))).encode()
            except BaseException as e:
                raw = _JSON.dumps({"error": _safe_str(e)}).encode()
            finally:
                in_cell[0] = False
            answer(b"done %d 0 %d\n" % (int(req["id"]), len(raw)) + raw)
            continue
        out = []
        environ.clear()
        environb.update(base_env)
        for kv in req.get("env") or []:
            k, _, v = kv.partition("=")
            if k:
                environ[k] = v
        filename = req["filename"]
        sys.argv = [filename] + list(req.get("args") or [])
        mod.__file__ = os.path.join(workspace, filename)
        status = 0
        in_cell[0] = True
        try:
            status = _execute(req["code"], filename, None, False, mod, hooks, int(req["value_limit"]), out.append, None) or 0
        except SystemExit as e:
            status = _exit_status(e)
        except KeyboardInterrupt as e:
            # Between the program's last line and the runner's.
            _report_failure(e, filename, lambda r: out.append(_JSON.dumps(r).encode()))
            status = 1
        finally:
            in_cell[0] = False
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        token = req["token"].encode()
        for fd in (1, 2):
            try:
                write_all(fd, token)
            except OSError:
                pass
        raw = b"".join(out)
        answer(b"done %d %d %d\n" % (int(req["id"]), status, len(raw)) + raw)


# The names code mode gives a live session's __main__, which are not the
# program's variables.
_GIVEN_NAMES = frozenset(("call_tool", "call_tool_sync", "tools", "ToolError", "ModuleBlockedError",
                          "PolicyBlockedError"))


def _cell_names(mod):
    """The names a live session's cells left in __main__: not its own
    (__name__, __builtins__, …) nor those code mode gives it."""
    return [n for n in list(mod.__dict__) if not n.startswith("__") and n not in _GIVEN_NAMES]


def _kind(v):
    """v's type, as a Result names it: int, pandas.core.frame.DataFrame."""
    t = type(v)
    return t.__qualname__ if t.__module__ == "builtins" else "%s.%s" % (t.__module__, t.__qualname__)


def _variables(mod, limit):
    """The names a live session's cells left in __main__: each with its
    type and a short repr, built with reprlib's bounds so that a large
    object costs a glance, not a full rendering. Interrupted (SIGINT) like
    a cell when a repr() does not return."""
    reprlib = _std("reprlib")

    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 2, 80, 80
    short.maxlist = short.maxtuple = short.maxset = short.maxdict = short.maxfrozenset = short.maxdeque = 6
    out = []
    for name in _cell_names(mod):
        if len(out) >= limit:
            break
        v = mod.__dict__[name]
        kind = _kind(v)
        try:
            r = short.repr(v)
        except Exception:
            r = "<%s: repr() failed>" % kind
        if len(r) > 200:
            r = r[:199] + "…"
        out.append({"name": name, "type": kind, "repr": r})
    return out


# A fork of a live session copies what its cells left in __main__ into the
# fork's own interpreter, in a sandbox of its own: pickled here (protocol 5,
# large buffers such as numpy's out of band, so that they are written as
# they are and not copied), unpickled there. Functions and classes the
# cells defined are copied by value (their code, defaults, closures and
# attributes), modules by name (imported again there); a name whose value
# cannot be pickled (an open file, a thread, a generator, a socket) is
# left out and listed with the reason.

def _fork_pickler(pickle, types, mod, buffers):
    marshal = _std("marshal")
    fork = _fork_module(types)
    main_dict = mod.__dict__

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if obj is main_dict:
                return ("main",)
            if isinstance(obj, types.ModuleType):
                if obj is mod:
                    return ("module", "__main__")
                name = getattr(obj, "__name__", None)
                if isinstance(name, str) and sys.modules.get(name) is obj:
                    return ("module", name)
                raise pickle.PicklingError("module %r is not one Python can import again" % (name,))
            return None

        def reducer_override(self, obj):
            if isinstance(obj, types.CodeType):
                return marshal.loads, (marshal.dumps(obj),)
            if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__":
                closure = None
                if obj.__closure__ is not None:
                    closure = len(obj.__closure__)
                    values = []
                    for c in obj.__closure__:
                        try:
                            values.append((True, c.cell_contents))
                        except ValueError:
                            values.append((False, None))
                else:
                    values = []
                state = (obj.__defaults__, obj.__kwdefaults__, obj.__qualname__, obj.__doc__,
                         getattr(obj, "__annotations__", None), dict(obj.__dict__), values)
                return (fork.make_function, (obj.__code__, main_dict, obj.__name__, closure),
                        state, None, None, fork.fill_function)
            if isinstance(obj, type) and obj.__module__ == "__main__":
                attrs = {}
                for k, v in obj.__dict__.items():
                    if k in ("__dict__", "__weakref__") or isinstance(v, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                        continue
                    attrs[k] = v
                return (fork.skeleton_class, (type(obj), obj.__name__, obj.__bases__, obj.__qualname__),
                        attrs, None, None, fork.fill_class)
            if isinstance(obj, (staticmethod, classmethod)):
                return type(obj), (obj.__func__,)
            if isinstance(obj, property):
                return property, (obj.fget, obj.fset, obj.fdel, obj.__doc__)
            return NotImplemented

    def buffer_callback(b):
        try:
            m = b.raw()
        except BufferError:
            return True  # not contiguous: pickled in band
        if m.nbytes < 1 << 16:
            return True
        buffers.append(m)
        return False

    return Pickler, buffer_callback


def _fork_module(types):
    """The module the pickle names its constructors from, in both
    interpreters: pickle refers to a function by module and name."""
    m = sys.modules.get("_codecell_fork")
    if m is None:
        m = types.ModuleType("_codecell_fork")
        for name, f in (("make_function", _make_function), ("fill_function", _fill_function),
                        ("skeleton_class", _skeleton_class), ("fill_class", _fill_class)):
            f.__module__, f.__qualname__ = "_codecell_fork", name
            setattr(m, name, f)
        sys.modules["_codecell_fork"] = m
    return m


def _make_function(code, globals, name, cells):
    import types

    closure = None if cells is None else tuple(types.CellType() for _ in range(cells))
    return types.FunctionType(code, globals, name, None, closure)


def _fill_function(f, state):
    defaults, kwdefaults, qualname, doc, annotations, attrs, values = state
    f.__defaults__, f.__kwdefaults__, f.__qualname__, f.__doc__ = defaults, kwdefaults, qualname, doc
    if annotations:
        f.__annotations__ = annotations
    f.__dict__.update(attrs)
    for cell, (full, v) in zip(f.__closure__ or (), values):
        if full:
            cell.cell_contents = v


def _skeleton_class(meta, name, bases, qualname):
    cls = meta(name, bases, {"__module__": "__main__", "__qualname__": qualname})
    return cls


def _fill_class(cls, attrs):
    for k, v in attrs.items():
        if k in ("__module__", "__qualname__", "__doc__"):
            if k == "__doc__":
                try:
                    setattr(cls, k, v)
                except (AttributeError, TypeError):
                    pass
            continue
        setattr(cls, k, v)


class _StateTooLarge(Exception):
    """The state, pickled, is larger than a fork may copy."""


def _snapshot(mod, limit):
    """What a fork of this interpreter needs: a report (the names copied,
    those left out and why) and the parts of the blob _restore reads: the
    pickle's length, the pickle, and each out-of-band buffer with its
    length. limit bounds the blob."""
    pickle = _std("pickle")
    types = _std("types")
    io = _std("io")
    struct = _std("struct")
    names = _cell_names(mod)

    def dump(values):
        buffers = []
        Pickler, callback = _fork_pickler(pickle, types, mod, buffers)
        f = io.BytesIO()
        Pickler(f, protocol=5, buffer_callback=callback).dump(values)
        return f.getbuffer(), buffers

    skipped = []
    values = {n: mod.__dict__[n] for n in names}
    try:
        data, buffers = dump(values)
    except Exception:
        # Find what cannot be copied, one name at a time, and copy the rest
        # together (what they share stays shared).
        for n in names:
            try:
                dump({n: values[n]})
            except Exception as e:
                skipped.append({"name": n, "type": _kind(values[n]), "reason": _safe_str(e) or type(e).__name__})
                del values[n]
        data, buffers = dump(values)
    parts = [struct.pack("<Q", len(data)), data, struct.pack("<I", len(buffers))]
    for b in buffers:
        parts.append(struct.pack("<Q", b.nbytes))
        parts.append(b)
    size = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)
    if limit > 0 and size > limit:
        raise _StateTooLarge("the interpreter's state is %d bytes pickled, more than the %d a fork may copy" % (size, limit))
    parts = [p if isinstance(p, bytes) else p.cast("B") for p in parts]
    return {"copied": sorted(values), "skipped": skipped, "bytes": size}, parts


def _snapshot_child(mod, limit, out_fd, close_fds, write_all):
    """In a copy of a live interpreter made for a fork: sends on out_fd
    the report of what the state holds (a line of JSON), the length of the
    state (a line), and the state (see _snapshot); then ends. It is the one
    the kernel kills first should the copy's pages run the sandbox out of
    memory, and its output goes nowhere."""
    import os
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for fd in close_fds:
            try:
                os.close(fd)
            except OSError:
                pass  # a cell closed it
        null = os.open("/dev/null", os.O_RDWR)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        try:
            report, parts = _snapshot(mod, limit)
        except BaseException as e:
            report, parts = {"error": _safe_str(e), "too_large": isinstance(e, _StateTooLarge), "bytes": 0}, []
        write_all(out_fd, _JSON.dumps(report).encode() + b"\n%d\n" % report["bytes"])
        for p in parts:
            write_all(out_fd, p)
    finally:
        os._exit(0)


def _restore(mod, blob):
    """Unpickles a blob _snapshot made into __main__, and reports the names
    it set."""
    pickle = _std("pickle")
    struct = _std("struct")
    importlib = _std("importlib")
    _fork_module(_std("types"))
    view = memoryview(blob)
    (n,) = struct.unpack_from("<Q", view, 0)
    off = 8
    data = view[off:off + n]
    off += n
    (count,) = struct.unpack_from("<I", view, off)
    off += 4
    buffers = []
    for _ in range(count):
        (k,) = struct.unpack_from("<Q", view, off)
        off += 8
        buffers.append(view[off:off + k])
        off += k
    main_dict = mod.__dict__

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            if pid[0] == "main":
                return main_dict
            if pid[0] == "module":
                if pid[1] == "__main__":
                    return mod
                return importlib.import_module(pid[1])
            raise pickle.UnpicklingError("unknown reference %r" % (pid,))

    values = Unpickler(_std("io").BytesIO(data), buffers=buffers).load()
    main_dict.update(values)
    return {"restored": sorted(values)}


# Whether the program opened a file for writing through a buffer (see
# _codecell_finish).
_WROTE = []


def _note_writes(event, args):
    if event == "open" and not _WROTE and len(args) > 1:
        mode = args[1]
        if isinstance(mode, str) and ("w" in mode or "a" in mode or "x" in mode or "+" in mode):
            _WROTE.append(True)


def _exit_status(e):
    """The exit status SystemExit e asks for, as the interpreter's own exit
    would make it: a code that is not a number is printed, and is 1."""
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        sys.stderr.write(str(c) + "\n")
    except Exception:
        pass
    return 1


def _codecell_finish(main):
    """Runs main, then ends the interpreter as its own exit would —
    non-daemon threads joined, atexit handlers run, stdout and stderr
    flushed, SystemExit's code kept — but without tearing every module
    down, which takes milliseconds and shows nothing. Unless the program
    opened a file for writing through a buffer: only that teardown flushes
    one it left open, so then the interpreter exits as usual."""
    sys.addaudithook(_note_writes)
    code = 0
    try:
        main()
    except SystemExit as e:
        code = _exit_status(e)
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    if _WROTE:
        sys.exit(code)
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    import os

    os._exit(code)


if __name__ == "__codecell_template__":
    _codecell_template()
elif len(sys.argv) > 4 and sys.argv[1] == "--live":
    _codecell_live()
elif len(sys.argv) > 2 and sys.argv[1] == "--warm":
    _codecell_finish(_codecell_warm)
else:
    _codecell_finish(_codecell_main)
