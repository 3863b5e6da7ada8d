// guard: {"policy": {"block": ["network"]}, "expect": "sandbox", "stops": "the empty network namespace", "value": "stopped"}
// net is a socket module (low_level_network), which this policy allows.
const net = require("net");
const outcome = await new Promise((resolve) => {
  const s = net.connect(Number(process.env.PORT), "127.0.0.1");
  s.on("connect", () => { s.destroy(); resolve("connected"); });
  s.on("error", () => resolve("stopped"));
});
outcome;
