# An uncaught exception: the traceback points at the user's line.
def average(values):
    return sum(values) / len(values)


print(average([]))
