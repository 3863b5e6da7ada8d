// codecell's JavaScript runner: runs one program under the code-mode rules.
//
// Started as `node --enable-source-maps runner.js CONFIG`. The host has
// already turned the program into program.js, a CommonJS module exporting one
// async function whose return value is the program's result. The result
// travels to the host as one JSON record on an inherited file descriptor,
// never through stdout.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { pathToFileURL } = require('node:url');
const net = require('node:net');

// What the runner uses after a program's or a live cell's code has run,
// kept from before any: the code shares the interpreter, and may replace
// Promise, JSON or Buffer (or their functions) for itself.
const RunnerPromise = Promise;
const promiseRace = Promise.race.bind(Promise);
const jsonParse = JSON.parse;
const jsonStringify = JSON.stringify;
const bufferFrom = Buffer.from.bind(Buffer);
const bufferConcat = Buffer.concat.bind(Buffer);
const bufferByteLength = Buffer.byteLength.bind(Buffer);
const fsWriteSync = fs.writeSync;

if (process.argv[2] === '--warm') {
  // Started ahead of its job as `runner.js --warm FD`: node and the runner
  // are loaded and nothing else. Say so with one byte on the result channel,
  // read the job from FD to its end (the rest of the command this would have
  // been started with and the job's environment, NUL-separated), and run it
  // as that command would have.
  const fd = Number(process.argv[3]);
  // What a program's first console.log would otherwise start on its own
  // time (about 3 ms): the streams of stdout and stderr, which already are
  // the run's pipes, their first write (of nothing: the host reads no
  // byte), and util's formatting.
  process.stdout.write('');
  process.stderr.write('');
  require('node:util').format('%s %o', '', { a: [1] });
  fs.writeSync(3, 'R');
  const parts = fs.readFileSync(fd).toString('utf8').split('\0');
  fs.closeSync(fd);
  if (parts.length < 2 || parts[0] !== 'codecell-warm 1') {
    process.stderr.write('codecell runner: the job did not come\n');
    process.exit(125);
  }
  const n = Number(parts[1]);
  for (const k of Object.keys(process.env)) delete process.env[k];
  for (const kv of parts.slice(2 + n)) {
    const i = kv.indexOf('=');
    if (i > 0) process.env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  process.argv = [process.argv[0], ...parts.slice(2, 2 + n)];
}

// A live session's interpreter (see runLive) is started as `runner.js
// --live CONTROL_FD TOOL_FD WORKSPACE`; each cell then sets cfg's
// filename, args and value_limit.
const live = process.argv[2] === '--live';
const controlFD = live ? Number(process.argv[3]) : -1;
const cfg = live
  ? { workspace: process.argv[5], tool_fd: Number(process.argv[4]), value_fd: -1, filename: 'main.js', args: [], value_limit: 0 }
  : jsonParse(fs.readFileSync(process.argv[2], 'utf8'));
let programPath = path.join(cfg.workspace, cfg.filename);
process.argv = [process.argv[0], programPath, ...cfg.args];

// Packages resolve from the workspace, as if the program were saved there.
const workspaceRequire = Module.createRequire(path.join(cfg.workspace, 'index.js'));

function importFromWorkspace(spec) {
  let target = spec;
  if (!Module.isBuiltin(spec) && !/^[a-z]+:/.test(spec)) {
    try {
      target = pathToFileURL(workspaceRequire.resolve(spec)).href;
    } catch {
      // Let import() report the module as missing, in its own words.
    }
  }
  return import(target);
}

function send(record) {
  sendText(jsonStringify(record));
}

// In a live session, what a program would write on its result channel is
// gathered for the cell's answer (see runLive).
let gathered = null;

function sendText(text) {
  if (gathered) {
    gathered.push(text);
    return;
  }
  const data = bufferFrom(text, 'utf8');
  let off = 0;
  while (off < data.length) {
    off += fsWriteSync(cfg.value_fd, data, off, data.length - off);
  }
}

// frameRE finds the program's line in a stack trace.
function frameRE() {
  const escaped = cfg.filename.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp('/src/' + escaped + ':(\\d+):(\\d+)');
}

// errorText is err as stderr shows it: the program's frames; the runner's
// and node's internals are noise.
function errorText(err) {
  if (err instanceof Error) {
    const lines = String(err.stack || err).split('\n');
    // (node's own modules, node:internal/… and node:vm alike, and the
    // code that runs a live session's cell)
    return lines.filter((l) => !/^\s+at /.test(l) || (!/[( ]node:[\w/]+:\d/.test(l) && !l.includes('codecell-cell:') && !l.includes(__filename))).join('\n');
  }
  return 'Uncaught ' + safeString(err);
}

function report(err) {
  process.stderr.write(errorText(err) + '\n');
  const m = err instanceof Error ? frameRE().exec(String(err.stack)) : null;
  const error = {
    type: err instanceof Error ? err.name || 'Error' : typeof err,
    message: (err instanceof Error ? safeString(err.message) : safeString(err)).slice(0, 4000),
    filename: cfg.filename,
    line: m ? Number(m[1]) : 0,
    column: m ? Number(m[2]) : 0,
  };
  if (err instanceof Error && err.name === 'ToolError' && err.envelope && typeof err.envelope === 'object') {
    // The tool's own envelope: its code, whether a retry can help, its hints.
    error.tool_error = err.envelope;
  }
  if (err instanceof Error && err.code === 'ERR_ACCESS_DENIED') {
    // node's permission model refused it: the policy's run-time layer.
    error.policy_blocked = safeString(err.permission || 'access');
    error.rule = err.permission === 'FileSystemRead' || err.permission === 'FileSystemWrite' ? 'filesystem.runtime' : 'process.runtime';
  }
  send({ error });
}

function safeString(v) {
  try {
    return String(v);
  } catch {
    return '<' + typeof v + '>';
  }
}

function warn(warnings, msg) {
  if (warnings.length < 10) warnings.push(msg);
  else if (warnings.length === 10) warnings.push('more parts of the value were not JSON');
}

// plain returns v as plain JSON data, following JSON.stringify where JSON has
// an answer, and naming every part it had to turn into text.
function plain(v, where, depth, seen, warnings) {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      if (!Number.isFinite(v)) {
        warn(warnings, `${where}: ${v} is not JSON; replaced by the string "${v}"`);
        return String(v);
      }
      return v;
    case 'bigint':
      warn(warnings, `${where}: a BigInt is not JSON; replaced by the string "${v}"`);
      return v.toString();
    case 'undefined':
      return null;
    case 'function':
      warn(warnings, `${where}: a function is not JSON; replaced by its name`);
      return `[Function: ${v.name || 'anonymous'}]`;
    case 'symbol':
      warn(warnings, `${where}: a symbol is not JSON; replaced by its description`);
      return v.toString();
  }
  if (v === null) return null;
  if (typeof v.toJSON === 'function') {
    return plain(v.toJSON(), where, depth + 1, seen, warnings);
  }
  if (depth > 100) {
    warn(warnings, `${where}: nested deeper than 100 levels; replaced by "[…]"`);
    return '[…]';
  }
  if (seen.has(v)) {
    warn(warnings, `${where}: a reference cycle; replaced by "[Circular]"`);
    return '[Circular]';
  }
  if (typeof v.then === 'function') {
    warn(warnings, `${where}: a Promise is not JSON (await it to return its value)`);
    return '[Promise]';
  }
  seen.add(v);
  try {
    if (Array.isArray(v)) {
      return v.map((x, i) => plain(x, `${where}[${i}]`, depth + 1, seen, warnings));
    }
    if (ArrayBuffer.isView(v)) {
      return Array.from(v, (x, i) => plain(x, `${where}[${i}]`, depth + 1, seen, warnings));
    }
    if (v instanceof Map) {
      warn(warnings, `${where}: a Map became a JSON object`);
      const out = {};
      for (const [k, x] of v) out[String(k)] = plain(x, `${where}[${String(k)}]`, depth + 1, seen, warnings);
      return out;
    }
    if (v instanceof Set) {
      warn(warnings, `${where}: a Set became a JSON array`);
      return Array.from(v, (x, i) => plain(x, `${where}[${i}]`, depth + 1, seen, warnings));
    }
    if (v instanceof Error) {
      warn(warnings, `${where}: an Error became {name, message}`);
      return { name: v.name, message: v.message };
    }
    const out = {};
    for (const k of Object.keys(v)) {
      const x = v[k];
      // As JSON.stringify does, an undefined property is left out; a
      // function or a symbol is described as it is anywhere else.
      if (x === undefined) continue;
      out[k] = plain(x, `${where}.${k}`, depth + 1, seen, warnings);
    }
    return out;
  } finally {
    seen.delete(v);
  }
}

// The program's end of the tool channel: JSON-RPC 2.0, one object per line,
// on an inherited socket. Calls made at once (Promise.all) are in flight at
// once. The socket holds the event loop open only while a call is pending,
// so the program still ends when its own work does.
let channel = null;
let nextId = 0;
const pending = new Map();
let closed = null;

function openChannel() {
  channel = new net.Socket({ fd: cfg.tool_fd, readable: true, writable: true });
  channel.setEncoding('utf8');
  channel.unref();
  let buf = '';
  channel.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let msg;
      try {
        msg = jsonParse(line);
      } catch {
        continue;
      }
      const p = pending.get(msg.id);
      if (!p) continue;
      pending.delete(msg.id);
      if (pending.size === 0) channel.unref();
      if (msg.error) p.reject(atCallSite(toolError(msg.error.data || { error_kind: 'internal', error_code: 'TOOL_CHANNEL_ERROR', message: msg.error.message, retryable: false }), p.site));
      else p.resolve(msg.result);
    }
  });
  const fail = () => {
    closed = { error_kind: 'internal', error_code: 'TOOL_CHANNEL_CLOSED', message: 'the tool channel closed', retryable: false };
    for (const p of pending.values()) p.reject(atCallSite(toolError(closed), p.site));
    pending.clear();
  };
  channel.on('close', fail);
  channel.on('error', fail);
}

// A failed call throws an Error whose message is the envelope as JSON, and
// whose .envelope holds it parsed.
function toolError(envelope) {
  const e = new Error(jsonStringify(envelope));
  e.name = 'ToolError';
  e.envelope = envelope;
  return e;
}

// atCallSite gives a tool's error the stack of the program's call, not the
// channel's: the frames that led to callTool, without the runner's own or
// node's.
function atCallSite(e, site) {
  if (site && typeof site.stack === 'string') {
    const frames = site.stack.split('\n').slice(1).filter((l) => !l.includes(__filename) && !/[( ]node:[\w/]+:\d/.test(l) && !l.includes('codecell-cell:'));
    e.stack = `${e.name}: ${e.message}\n${frames.join('\n')}`;
  }
  return e;
}

function callTool(name, params = {}, options = undefined) {
  if (typeof name !== 'string' || name === '') {
    return RunnerPromise.reject(new TypeError('callTool: the tool\'s name must be a non-empty string'));
  }
  if (params === null || params === undefined) params = {};
  if (typeof params !== 'object' || Array.isArray(params)) {
    return RunnerPromise.reject(new TypeError('callTool: params must be an object (the tool\'s JSON object)'));
  }
  let asHandle = false;
  if (options !== undefined && options !== null) {
    const keys = typeof options === 'object' ? Object.keys(options) : null;
    if (!keys || keys.some((k) => k !== 'as') || (options.as !== undefined && options.as !== 'handle')) {
      return RunnerPromise.reject(new TypeError('callTool: options are {as: "handle"}, to keep the result on the host and read it in pages, or nothing'));
    }
    asHandle = options.as === 'handle';
  }
  const site = {};
  Error.captureStackTrace(site, callTool);
  const call = request('tools/call', asHandle ? { name, arguments: params, as: 'handle' } : { name, arguments: params }, site);
  return asHandle ? call.then(toolHandle) : call;
}

// request sends one request on the tool channel and settles with its answer.
function request(method, params, site) {
  if (closed) return RunnerPromise.reject(toolError(closed));
  if (!channel) openChannel();
  return new RunnerPromise((resolve, reject) => {
    const id = ++nextId;
    const line = jsonStringify({ jsonrpc: '2.0', id, method, params }) + '\n';
    pending.set(id, { resolve, reject, site });
    if (pending.size === 1) channel.ref();
    channel.write(line);
  });
}

// toolHandle is a tool's result kept on the host (callTool(name, params,
// {as: 'handle'})): size bytes of type 'text' (the text of a string result)
// or 'json' (the result's JSON), read a page at a time (read(offset,
// length) gives {data, next, eof, ...}; for await (const page of
// h.pages())), whole (text(), json()), or into a file (save(path)).
function toolHandle(info) {
  const handle = info.handle;
  const read = (offset = 0, length = 0) => {
    if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0) {
      return RunnerPromise.reject(new TypeError('read: offset and length are whole numbers of bytes, 0 or more'));
    }
    const site = {};
    Error.captureStackTrace(site, read);
    return request('handles/read', { handle, offset, length }, site);
  };
  async function* pages(length = 0) {
    for (let offset = 0; ;) {
      const page = await read(offset, length);
      if (page.data) yield page.data;
      if (page.eof) return;
      offset = page.next;
    }
  }
  const h = {
    handle, tool: info.tool, type: info.type, size: info.size,
    read, pages,
    async text() {
      const parts = [];
      for await (const p of pages()) parts.push(p);
      return parts.join('');
    },
    async json() { return jsonParse(await h.text()); },
    async save(file) {
      const fd = fs.openSync(file, 'w');
      try {
        for await (const p of pages()) fs.writeSync(fd, p);
      } finally {
        fs.closeSync(fd);
      }
      return info.size;
    },
    toString() { return `[ToolHandle ${handle}: ${info.size} bytes of ${info.type} from ${info.tool}]`; },
  };
  return h;
}

// tools.search(params) calls "search"; tools.github.search_issues(params)
// calls "github.search_issues"; tools['get-sum'](params) works for names
// that are not identifiers.
function toolProxy(prefix) {
  return new Proxy(function () {}, {
    get(_, prop) {
      // Not a thenable, not a tool named after a symbol.
      if (typeof prop === 'symbol' || prop === 'then') return undefined;
      return toolProxy(prefix ? prefix + '.' + prop : prop);
    },
    apply(_, __, args) {
      if (!prefix) return RunnerPromise.reject(new TypeError('tools is not a function: call tools.<name>(params)'));
      return callTool(prefix, args[0], args[1]);
    },
  });
}
const tools = toolProxy('');
globalThis.callTool = callTool;
globalThis.tools = tools;

// settle sends the program's value, or reports its failure; it returns the
// exit status.
function settle(value) {
  if (value === undefined) {
    send({});
    return 0;
  }
  const warnings = [];
  const json = jsonStringify(plain(value, '$', 0, new Set(), warnings));
  const size = bufferByteLength(json, 'utf8');
  if (size > cfg.value_limit) {
    send({ value_too_large: size, warnings });
    return 0;
  }
  sendText('{"value":' + json + ',"warnings":' + jsonStringify(warnings) + '}');
  return 0;
}

function fail(err) {
  report(err);
  return 1;
}

if (live) {
  runLive();
} else {
  const program = require(cfg.main);

  // The first line on the result channel is the runner's, written before any
  // of the program runs: the host trusts what it says (here, only that the
  // program starts), and takes what follows as the program's value, which
  // the program could have written itself.
  sendText('{"start":true}\n');
  // When nothing is left to do — the event loop is empty and no listener of
  // the program's could give it more — end through process.exit, which
  // emits 'exit' and takes process.exitCode as a natural end does, but
  // skips the teardown of node's environment (0.7 of 1.5 ms). Listening
  // makes no difference to when the loop is empty.
  process.on('beforeExit', function endNow() {
    if (process.listenerCount('beforeExit') === 1) process.exit();
  });
  program(workspaceRequire, importFromWorkspace, programPath, cfg.workspace, callTool, tools).then(settle, (err) => {
    process.exitCode = fail(err);
  });
}

// runLive serves a live session: cells, one at a time, each a program as
// the host transpiled it (a module exporting one async function), run in
// this one interpreter, whose globals persist — the host rewrote the
// cell's top-level declarations into assignments to globals, named in
// cell.globals. For each cell it answers "done ID STATUS LENGTH\n" and the
// LENGTH bytes a program would have written on its result channel, after
// writing the cell's token on stdout and stderr. SIGINT interrupts the
// cell: its synchronous part (vm's breakOnSigint), or the wait of one that
// awaits; a loop that never yields after an await cannot be, and the host
// ends the interpreter.
function runLive() {
  const vm = require('node:vm');
  const ctl = new net.Socket({ fd: controlFD, readable: true, writable: true });
  // (the socket's write as it was, before any cell could replace it)
  const answer = ctl.write.bind(ctl);
  const baseEnv = { ...process.env };
  let interrupt = null;
  process.on('SIGINT', () => {
    if (interrupt) interrupt();
  });
  // An error nothing catches (thrown in a timer or a callback, a promise
  // rejected with no handler) would end node, and with it what every cell
  // left, at some later moment: often while the next cell runs, which
  // would then fail for it. As a program's, it ends the cell it happens
  // in, which fails with it; between cells it is said on stderr, as
  // Python says a thread's.
  let crash = null;
  const uncaught = (err) => {
    if (crash) crash(err);
    else process.stderr.write(errorText(err) + '\n');
  };
  process.on('uncaughtException', uncaught);
  process.on('unhandledRejection', uncaught);
  const start = new vm.Script('globalThis.__codecell_cell__()', { filename: 'codecell-cell' });
  // What the globals were before any cell: the rest are the cells'.
  const given = new Set(Object.getOwnPropertyNames(globalThis));

  function variables(limit) {
    const util = require('node:util');
    const out = [];
    for (const name of Object.getOwnPropertyNames(globalThis)) {
      if (given.has(name) || name.startsWith('__codecell')) continue;
      if (out.length >= limit) break;
      let v;
      try {
        v = globalThis[name];
      } catch {
        continue;
      }
      let type = v === null ? 'null' : typeof v;
      if (type === 'object' && v.constructor && typeof v.constructor.name === 'string') type = v.constructor.name;
      let repr;
      try {
        repr = util.inspect(v, { depth: 1, maxArrayLength: 6, maxStringLength: 80, breakLength: Infinity });
      } catch {
        repr = `<${type}: inspect failed>`;
      }
      if (repr.length > 200) repr = repr.slice(0, 199) + '…';
      out.push({ name, type, repr });
    }
    return out;
  }
  const queue = [];
  let busy = false;
  let buf = '';
  ctl.setEncoding('utf8');
  ctl.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      queue.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    next();
  });
  ctl.on('end', () => process.exit(0));
  ctl.on('error', (err) => {
    // A cell closed or replaced descriptor 3 under the socket: say so,
    // and end with a status of the runner's own.
    process.stderr.write(`codecell: the session's control channel failed (${safeString(err && err.message)}): a cell closed or replaced the interpreter's descriptors; the next cell starts a fresh interpreter\n`);
    process.exit(125);
  });
  answer('ready\n');

  function next() {
    if (busy || queue.length === 0) return;
    busy = true;
    const req = jsonParse(queue.shift());
    if (req.variables) {
      let raw;
      try {
        raw = bufferFrom(jsonStringify(variables(req.max || 1000)), 'utf8');
      } catch (err) {
        raw = bufferFrom(jsonStringify({ error: safeString(err) }), 'utf8');
      }
      answer(bufferConcat([bufferFrom(`done ${req.id} 0 ${raw.length}\n`), raw]));
      busy = false;
      next();
      return;
    }
    runCell(req).then((status) => {
      const raw = bufferFrom(gathered.join(''), 'utf8');
      gathered = null;
      for (const fd of [1, 2]) {
        try {
          fsWriteSync(fd, req.token);
        } catch {
          // the host stopped reading: nothing to mark
        }
      }
      answer(bufferConcat([bufferFrom(`done ${req.id} ${status} ${raw.length}\n`), raw]));
      busy = false;
      next();
    });
  }

  async function runCell(req) {
    gathered = [];
    for (const k of Object.keys(process.env)) delete process.env[k];
    Object.assign(process.env, baseEnv);
    for (const kv of req.env || []) {
      const i = kv.indexOf('=');
      if (i > 0) process.env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    cfg.filename = req.filename;
    cfg.args = req.args || [];
    cfg.value_limit = req.value_limit;
    programPath = path.join(cfg.workspace, cfg.filename);
    process.argv = [process.argv[0], programPath, ...cfg.args];
    let program;
    try {
      const where = path.join(__dirname, 'cells', String(req.id), 'program.js');
      const m = new Module(where, module);
      m.filename = where;
      m.paths = Module._nodeModulePaths(cfg.workspace);
      m._compile(req.code, where);
      program = m.exports;
      for (const name of req.globals || []) {
        if (!(name in globalThis)) globalThis[name] = undefined;
      }
    } catch (err) {
      return fail(err);
    }
    sendText('{"start":true}\n');
    const interrupted = new RunnerPromise((_, reject) => {
      interrupt = () => {
        const e = new Error('the cell was interrupted');
        e.name = 'KeyboardInterrupt';
        reject(e);
      };
    });
    let crashed = null;
    const crashes = new RunnerPromise((_, reject) => {
      crash = (err) => {
        if (!crashed) crashed = { err };
        reject(err);
      };
    });
    try {
      globalThis.__codecell_cell__ = () => program(workspaceRequire, importFromWorkspace, programPath, cfg.workspace, callTool, tools);
      const pending = start.runInThisContext({ breakOnSigint: true });
      const value = await promiseRace([pending, interrupted, crashes]);
      // A rejection the cell left unhandled is known once the microtasks
      // its end ran are done: the cell's, not the next's.
      await new RunnerPromise((resolve) => setImmediate(resolve));
      if (crashed) return fail(crashed.err);
      return settle(value);
    } catch (err) {
      return fail(err);
    } finally {
      interrupt = null;
      crash = null;
      delete globalThis.__codecell_cell__;
    }
  }
}
