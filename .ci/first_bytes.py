"""A listener in place of an HTTPS server: records, in hex, the first six bytes a client sends.

Usage: first_bytes.py PORT OUT   (writes OUT.listening once it listens, then OUT; gives up after
30 s without a client)
"""

import socket
import sys

port, out = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(1)
open(out + ".listening", "w").close()
s.settimeout(30)
conn, _ = s.accept()
conn.settimeout(10)
data = b""
while len(data) < 6:
    chunk = conn.recv(6 - len(data))
    if not chunk:
        break
    data += chunk
with open(out, "w") as f:
    f.write(data.hex())
conn.close()
