// guard: {"policy": {"block": ["dynamic_eval"]}, "expect": "static", "rule": "dynamic_eval.eval", "at": [9, 23]}
interface Point {
  x: number;
  y: number;
}
type Pair<T> = [T, T];
const p: Point = { x: 1, y: 2 };
const pair: Pair<number> = [p.x, p.y];
const total = <number>eval("pair[0] + pair[1]");
total;
