# Notebook semantics: display() and figures come back as rich outputs, and the value of the
# last expression is the result (the terminal shows their text; --json gives the PNG too).
import matplotlib.pyplot as plt
import pandas as pd

df = pd.DataFrame({"x": range(5), "y": [v * v for v in range(5)]})
display(df.head(2))
df.plot(x="x", y="y")
plt.show()
df["y"].sum()
