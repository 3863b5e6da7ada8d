# guard: {"policy": {"block": ["network", "low_level_network", "process"]}, "expect": "allowed", "value": "plotted", "files": ["figure-1.png"]}
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
plt.show()
"plotted"
