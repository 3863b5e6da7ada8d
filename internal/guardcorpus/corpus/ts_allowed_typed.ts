// guard: {"policy": {"block": ["dynamic_eval", "filesystem", "low_level_network", "module_loading", "network", "process"]}, "expect": "allowed", "value": 6}
interface Item { price: number; qty?: number }
const items: Item[] = [{ price: 2, qty: 2 }, { price: 2 }];
const total = items.reduce((s: number, i: Item) => s + i.price * (i.qty ?? 1), 0);
total;
