# A matplotlib figure saved into the work dir; `--keep-files DIR` brings it back.
import matplotlib.pyplot as plt
import numpy as np

x = np.linspace(0, 2 * np.pi, 200)
plt.plot(x, np.sin(x), label="sin")
plt.plot(x, np.cos(x), label="cos")
plt.legend()
plt.savefig("plot.png", dpi=80)
print("saved plot.png")
