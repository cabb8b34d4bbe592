# The seed's example: the median of a small list.
import statistics

data = [1, 5, 3, 9, 2]
print(statistics.median(data))
