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

if (process.argv[2] === '--warm') {
  // Started ahead of its job as `runner.js --warm FD`: node and the runner
  // are loaded and nothing else. Say so with one byte on the result channel,
  // read the job from FD to its end (the rest of the command this would have
  // been started with and the job's environment, NUL-separated), and run it
  // as that command would have.
  const fd = Number(process.argv[3]);
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

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const programPath = path.join(cfg.workspace, cfg.filename);
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
  sendText(JSON.stringify(record));
}

function sendText(text) {
  const data = Buffer.from(text, 'utf8');
  let off = 0;
  while (off < data.length) {
    off += fs.writeSync(cfg.value_fd, data, off, data.length - off);
  }
}

const escaped = cfg.filename.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const frameRE = new RegExp('/src/' + escaped + ':(\\d+):(\\d+)');

function report(err) {
  let text;
  if (err instanceof Error) {
    // Keep the program's frames; the runner's and node's internals are noise.
    const lines = String(err.stack || err).split('\n');
    text = lines.filter((l) => !/^\s+at /.test(l) || (!l.includes('node:internal') && !l.includes(__filename))).join('\n');
  } else {
    text = 'Uncaught ' + safeString(err);
  }
  process.stderr.write(text + '\n');
  const m = err instanceof Error ? frameRE.exec(String(err.stack)) : null;
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
        msg = JSON.parse(line);
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
  const e = new Error(JSON.stringify(envelope));
  e.name = 'ToolError';
  e.envelope = envelope;
  return e;
}

// atCallSite gives a tool's error the stack of the program's call, not the
// channel's: the frames that led to callTool, without the runner's own.
function atCallSite(e, site) {
  if (site && typeof site.stack === 'string') {
    const frames = site.stack.split('\n').slice(1).filter((l) => !l.includes(__filename));
    e.stack = `${e.name}: ${e.message}\n${frames.join('\n')}`;
  }
  return e;
}

function callTool(name, params = {}) {
  if (typeof name !== 'string' || name === '') {
    return Promise.reject(new TypeError('callTool: the tool\'s name must be a non-empty string'));
  }
  if (params === null || params === undefined) params = {};
  if (typeof params !== 'object' || Array.isArray(params)) {
    return Promise.reject(new TypeError('callTool: params must be an object (the tool\'s JSON object)'));
  }
  if (closed) return Promise.reject(toolError(closed));
  if (!channel) openChannel();
  const site = {};
  Error.captureStackTrace(site, callTool);
  return new Promise((resolve, reject) => {
    const id = ++nextId;
    const line = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: params } }) + '\n';
    pending.set(id, { resolve, reject, site });
    if (pending.size === 1) channel.ref();
    channel.write(line);
  });
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
      if (!prefix) return Promise.reject(new TypeError('tools is not a function: call tools.<name>(params)'));
      return callTool(prefix, args[0]);
    },
  });
}
const tools = toolProxy('');
globalThis.callTool = callTool;
globalThis.tools = tools;

const program = require(cfg.main);

// The first line on the result channel is the runner's, written before any
// of the program runs: the host trusts what it says (here, only that the
// program starts), and takes what follows as the program's value, which
// the program could have written itself.
sendText('{"start":true}\n');
program(workspaceRequire, importFromWorkspace, programPath, cfg.workspace, callTool, tools).then(
  (value) => {
    if (value === undefined) {
      send({});
      return;
    }
    const warnings = [];
    const json = JSON.stringify(plain(value, '$', 0, new Set(), warnings));
    const size = Buffer.byteLength(json, 'utf8');
    if (size > cfg.value_limit) {
      send({ value_too_large: size, warnings });
      return;
    }
    sendText('{"value":' + json + ',"warnings":' + JSON.stringify(warnings) + '}');
  },
  (err) => {
    report(err);
    process.exitCode = 1;
  },
);
