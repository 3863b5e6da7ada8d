"""codecell's Python runner: runs one program under the code-mode rules.

Started as `python3 -I -B runner.py VALUE_FD TOOL_FD VALUE_LIMIT FILENAME
SOURCE WORKSPACE [ARGS...]`, or from its code compiled in advance by a bootstrap
that sets the same sys.argv. The program's source is turned
into one function, so that top-level `await` and `return` work and the value
of a final expression becomes the result; every name the program binds at
top level is declared global in that function, so the program behaves as a
module. The result travels to the host as one JSON record on an inherited
file descriptor, never through stdout.
"""

import sys


def _codecell_main():
    # Only builtin modules here: a program that prints a line must not pay
    # for importing ast, json or re. The rest is imported on the paths that
    # need it.
    import _ast
    import os

    value_fd, tool_fd, value_limit, filename, source, workspace = sys.argv[1:7]
    value_fd, tool_fd, value_limit = int(value_fd), int(tool_fd), int(value_limit)
    # The program's own subprocesses must not inherit the result channel.
    os.set_inheritable(value_fd, False)

    def send(record):
        import json

        data = json.dumps(record, ensure_ascii=False, allow_nan=False)
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:
            data = json.dumps(record, ensure_ascii=True, allow_nan=False).encode()
        send_bytes(data)

    def send_bytes(data):
        view = memoryview(data)
        while view:
            n = os.write(value_fd, view)
            view = view[n:]

    with open(source, encoding="utf-8", errors="surrogateescape") as f:
        src = f.read()

    sys.argv = [filename] + sys.argv[7:]
    sys.path.insert(0, workspace)
    sys.stdout.reconfigure(line_buffering=True)

    def remember_source():
        # Tracebacks read the program's lines through linecache.
        import linecache

        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)

    try:
        tree = compile(src, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        tree, is_async = _to_function(_ast, tree)
        code = compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as e:
        import traceback

        remember_source()
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
        sys.stderr.flush()
        send({"error": {"type": "SyntaxError", "message": str(e.msg), "filename": filename,
                        "line": e.lineno or 0, "column": e.offset or 0, "syntax": True}})
        os._exit(1)

    mod = type(sys)("__main__")
    mod.__file__ = os.path.join(workspace, filename)
    mod.__builtins__ = __builtins__
    mod.__dict__["__codecell_star_import__"] = _star_importer(mod.__dict__)
    tools = _ToolChannel(tool_fd)
    mod.__dict__["call_tool"] = tools.call
    mod.__dict__["call_tool_sync"] = tools.call_sync
    mod.__dict__["ToolError"] = ToolError
    sys.modules["__main__"] = mod
    exec(code, mod.__dict__)
    cell = mod.__dict__.pop("<module>")

    try:
        if is_async:
            import asyncio

            value = asyncio.run(cell())
        else:
            value = cell()
    except SystemExit:
        raise
    except BaseException as e:  # the program's failure, whatever it was
        remember_source()
        _report_failure(e, filename, send)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    if value is None:
        send_bytes(b"{}")
        return
    import json

    warnings = []
    try:
        plain = _plain(value, "$", 0, set(), warnings)
        data = json.dumps(plain, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except Exception as e:  # a value whose conversion itself fails
        warnings.append("$: %s could not be converted (%s); replaced by its repr()" % (type(value).__name__, e))
        data = json.dumps(_safe_repr(value))
    size = len(data.encode("utf-8", "surrogatepass"))
    if size > value_limit:
        send({"value_too_large": size, "warnings": warnings})
        return
    record = '{"value":' + data + ',"warnings":' + json.dumps(warnings) + "}"
    try:
        send_bytes(record.encode("utf-8"))
    except UnicodeEncodeError:
        send({"value": json.loads(data), "warnings": warnings})


class ToolError(RuntimeError):
    """A failed tool call. str(e) is the error envelope as JSON; e.envelope
    holds it parsed: error_kind, error_code, message, retryable, hints."""

    def __init__(self, envelope):
        import json

        self.envelope = envelope
        super().__init__(json.dumps(envelope))


class _ToolChannel:
    """The program's end of the tool channel: JSON-RPC 2.0, one object per
    line, on an inherited socket. A reader thread hands each response to the
    call that waits for it, so calls made at once (asyncio.gather) are in
    flight at once, from any event loop or thread."""

    def __init__(self, fd):
        self.fd = fd
        self.started = False

    def _start(self):
        import threading

        self.lock = threading.Lock()
        self.next_id = 0
        self.waiting = {}
        self.closed = None
        threading.Thread(target=self._read, name="codecell-tools", daemon=True).start()
        self.started = True

    def _send(self, name, params, deliver):
        import json

        if not isinstance(name, str) or not name:
            raise TypeError("call_tool: the tool's name must be a non-empty string")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise TypeError("call_tool: params must be a dict (the tool's JSON object), not %s" % type(params).__name__)
        body = json.dumps(params, allow_nan=False)
        if not self.started:
            self._start()
        with self.lock:
            if self.closed is not None:
                deliver({"error": {"data": self.closed}})
                return
            self.next_id += 1
            i = self.next_id
            self.waiting[i] = deliver
            line = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s,"arguments":%s}}\n' % (
                i, json.dumps(name), body)
            data = line.encode()
            import os

            while data:
                n = os.write(self.fd, data)
                data = data[n:]

    def _read(self):
        import json
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

    async def call(self, name, params=None):
        """await call_tool(name, params): calls a host tool and returns its
        result; a failure raises ToolError, a RuntimeError whose message is
        the error envelope JSON."""
        import asyncio

        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def deliver(msg):
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(msg))

        self._send(name, params, deliver)
        return self._outcome(await fut)

    def call_sync(self, name, params=None):
        """call_tool_sync(name, params): call_tool for code without an event
        loop; it blocks until the result comes."""
        import threading

        done = threading.Event()
        box = []

        def deliver(msg):
            box.append(msg)
            done.set()

        self._send(name, params, deliver)
        done.wait()
        return self._outcome(box[0])


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


def _star_importer(namespace):
    def star_import(module, level):
        import importlib

        if level:
            raise ImportError("attempted relative import with no known parent package")
        m = importlib.import_module(module)
        public = getattr(m, "__all__", None)
        if public is None:
            public = [k for k in vars(m) if not k.startswith("_")]
        for k in public:
            namespace[k] = getattr(m, k)

    return star_import


def _report_failure(e, filename, send):
    """Prints the traceback without the runner's frames (before, between or
    after the program's: the tool client's, say), and sends the error
    record."""
    line = 0
    try:
        import traceback

        runner = _report_failure.__code__.co_filename

        def prune(te, seen):
            if te is None or id(te) in seen:
                return
            seen.add(id(te))
            frames = list(te.stack)
            # What comes before the program's first frame (the runner's,
            # asyncio's) is how it was started, not what it did.
            first = next((i for i, f in enumerate(frames) if f.filename == filename), 0)
            te.stack = traceback.StackSummary.from_list([f for f in frames[first:] if f.filename != runner])
            prune(te.__cause__, seen)
            prune(te.__context__, seen)

        te = traceback.TracebackException(type(e), e, e.__traceback__)
        prune(te, set())
        for f in te.stack:
            if f.filename == filename:
                line = f.lineno
        sys.stderr.write("".join(te.format()))
    except BaseException:
        sys.stderr.write("%s\n" % type(e).__name__)
    cls = type(e)
    name = cls.__qualname__ if cls.__module__ in ("builtins", "__main__") else "%s.%s" % (cls.__module__, cls.__qualname__)
    send({"error": {"type": name, "message": _safe_str(e)[:4000], "filename": filename, "line": line,
                    "memory": isinstance(e, MemoryError)}})


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


def _short(key):
    return key if len(key) <= 40 else key[:40] + "…"


def _warn(warnings, msg):
    if len(warnings) < 10:
        warnings.append(msg)
    elif len(warnings) == 10:
        warnings.append("more parts of the value were not JSON")


_codecell_main()
