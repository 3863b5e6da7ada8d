// guard: {"policy": {"block": ["network", "process"]}, "expect": "allowed", "value": {"pages": 2, "first": "page:a", "socket": "sent:1"}}
// The program's own functions named like globals are its own, everywhere in it.
const pages = { a: "page:a", b: "page:b" };
async function fetch(name) { return pages[name]; }
class WebSocket { send(x) { return "sent:" + x; } }
async function load(names) { return Promise.all(names.map((n) => fetch(n))); }
const got = await load(["a", "b"]);
return { pages: got.length, first: got[0], socket: new WebSocket().send(1) };
