# The seed's hostile example: it runs, and the host is untouched.
import os

status = os.system("rm -rf / 2>/dev/null")
print("os.system returned", status)
print("/usr still there:", os.path.isdir("/usr/bin"))
