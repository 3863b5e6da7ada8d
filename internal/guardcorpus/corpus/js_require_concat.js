// guard: {"policy": {"block": ["process"]}, "expect": "static", "rule": "process.module", "at": [2, 12]}
const cp = require('child' + '_process');
cp.execSync("id");
