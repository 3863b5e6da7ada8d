// guard: {"policy": {"block": ["process"]}, "expect": "static", "rule": "process.module", "at": [2, 18]}
const { exec } = require("child_process");
exec("id");
