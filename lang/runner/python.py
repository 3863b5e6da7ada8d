"""codecell's Python runner: runs one program under the code-mode rules.

Started as `python3 -I -B runner.py CONFIG`. The program's source is turned
into one function, so that top-level `await` and `return` work and the value
of a final expression becomes the result; every name the program binds at
top level is declared global in that function, so the program behaves as a
module. The result travels to the host as one JSON record on an inherited
file descriptor, never through stdout.
"""

import sys


def _codecell_main():
    import ast
    import builtins
    import json
    import os
    import types

    with open(sys.argv[1], encoding="utf-8") as f:
        cfg = json.load(f)
    value_fd = cfg["value_fd"]
    filename = cfg["filename"]
    value_limit = cfg["value_limit"]
    # The program's own subprocesses must not inherit the result channel.
    os.set_inheritable(value_fd, False)

    def send(record):
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

    with open(cfg["source"], encoding="utf-8", errors="surrogateescape") as f:
        src = f.read()

    sys.argv = [filename] + list(cfg.get("args") or [])
    sys.path.insert(0, cfg["workspace"])
    sys.stdout.reconfigure(line_buffering=True)

    import linecache

    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)

    try:
        tree = ast.parse(src, filename=filename)
        tree, is_async = _to_function(ast, tree)
        code = compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as e:
        import traceback

        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
        sys.stderr.flush()
        send({"error": {"type": "SyntaxError", "message": str(e.msg), "filename": filename,
                        "line": e.lineno or 0, "column": e.offset or 0, "syntax": True}})
        os._exit(1)

    mod = types.ModuleType("__main__")
    mod.__file__ = os.path.join(cfg["workspace"], filename)
    mod.__builtins__ = builtins
    mod.__dict__["__codecell_star_import__"] = _star_importer(mod.__dict__)
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
        _report_failure(e, filename, send)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    if value is None:
        send({})
        return
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


def _to_function(ast, tree):
    """Wraps the module's statements in `def <module>()` (async when the
    program awaits at top level), declaring every top-level name global."""
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
        for child in ast.iter_child_nodes(n):
            visit(child)

    def visit_arguments(a):
        for d in a.defaults + [d for d in a.kw_defaults if d is not None]:
            visit(d)
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None and arg.annotation is not None:
                visit(arg.annotation)

    for stmt in tree.body:
        visit(stmt)

    class TopLevel(ast.NodeTransformer):
        # Only the top-level scope: nested functions and classes keep theirs.
        def visit_FunctionDef(self, n):
            return n

        visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

        def visit_AnnAssign(self, n):
            # `global x` and `x: int` cannot share a function: keep the value.
            if isinstance(n.target, ast.Name):
                if n.value is None:
                    return ast.copy_location(ast.Pass(), n)
                return ast.copy_location(ast.Assign(targets=[n.target], value=n.value), n)
            return n

        def visit_ImportFrom(self, n):
            if any(a.name == "*" for a in n.names):
                call = ast.Call(func=ast.Name(id="__codecell_star_import__", ctx=ast.Load()),
                                args=[ast.Constant(n.module or ""), ast.Constant(n.level)], keywords=[])
                return ast.copy_location(ast.Expr(value=call), n)
            return n

    future = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    body = [TopLevel().visit(s) for s in tree.body if s not in future]
    if body and isinstance(body[-1], ast.Expr):
        body[-1] = ast.copy_location(ast.Return(value=body[-1].value), body[-1])
    if names:
        body.insert(0, ast.Global(names=sorted(names)))
    if not body:
        body = [ast.Pass()]
    kind = ast.AsyncFunctionDef if state["async"] else ast.FunctionDef
    extra = {"type_params": []} if "type_params" in kind._fields else {}
    fn = kind(name="<module>", args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                  kw_defaults=[], kwarg=None, defaults=[]),
              body=body, decorator_list=[], returns=None, **extra)
    fn.lineno, fn.col_offset = 1, 0
    module = ast.Module(body=future + [fn], type_ignores=[])
    ast.fix_missing_locations(module)
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
    """Prints the traceback from the program's first frame on, and sends the
    error record."""
    line = 0
    try:
        import traceback

        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        t = tb
        while t is not None:
            if t.tb_frame.f_code.co_filename == filename:
                line = t.tb_lineno
            t = t.tb_next
        text = "".join(traceback.format_exception(type(e), e, tb if tb is not None else e.__traceback__))
        sys.stderr.write(text)
    except BaseException:
        sys.stderr.write("%s\n" % type(e).__name__)
    cls = type(e)
    name = cls.__qualname__ if cls.__module__ == "builtins" else "%s.%s" % (cls.__module__, cls.__qualname__)
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
