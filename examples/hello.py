# A first program: prints a line, and returns a value codecell reports
# separately from the output.
import platform

print(f"hello from Python {platform.python_version()}")

squares = {n: n * n for n in range(1, 6)}
squares
