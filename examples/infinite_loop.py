# The seed's runaway example: ends as a TimeoutError (run-examples gives it --timeout 5).
while True:
    pass
