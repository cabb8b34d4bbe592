# pandas in the sandbox.
import pandas as pd

df = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "temp_c": [4.5, 19.0, 31.2]})
print(df.describe())
print(df.sort_values("temp_c", ascending=False).to_string(index=False))
