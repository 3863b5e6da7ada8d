// guard: {"policy": {"block": ["dynamic_eval", "filesystem", "low_level_network", "module_loading", "network", "process"]}, "expect": "allowed", "value": {"sum": 55, "json": "{\"a\":[1,2]}", "cls": "Box", "note": "eval is a word"}}
class Box { constructor(v) { this.v = v; } get name() { return this.constructor.name; } }
const nums = Array.from({ length: 10 }, (_, i) => i + 1);
const sum = (await Promise.all(nums.map(async (n) => n))).reduce((a, b) => a + b, 0);
return { sum, json: JSON.stringify({ a: [1, 2] }), cls: new Box(1).name, note: "eval is a word" };
