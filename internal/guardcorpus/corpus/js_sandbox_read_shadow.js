// guard: {"policy": {"block": ["network"]}, "expect": "sandbox", "stops": "the read-only system view", "value": "stopped"}
const fs = require("fs");
let outcome;
try { fs.readFileSync("/etc/shadow"); outcome = "read"; } catch (e) { outcome = "stopped"; }
outcome;
