// guard: {"policy": {"block": ["filesystem"]}, "expect": "static", "rule": "filesystem.module", "at": [3, 1]}
const label: string = "files";
import fs from "fs";
fs.readdirSync(".").length;
