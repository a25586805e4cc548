"""A PostgreSQL wire-protocol tracer for finding which statement a driver sent when it fails.

    python3 wire_trace.py LISTEN_PORT SERVER_PORT

listens on 127.0.0.1:LISTEN_PORT, forwards every connection to 127.0.0.1:SERVER_PORT and
prints, per connection, each Query (Q) and Parse (P) message's SQL and each ErrorResponse (E)
with its SQLSTATE and message, in the order they pass. Point a client at LISTEN_PORT. Used to
write docs/clients.md; not part of the test.
"""

import os
import socket
import struct
import sys
import threading

LOCK = threading.Lock()
# WIRE_TRACE_VERBOSE=1 also prints every other message's type but DataRow, with the start of
# RowDescription (T), CommandComplete (C) and Describe (D) messages.
VERBOSE = os.environ.get("WIRE_TRACE_VERBOSE") == "1"


def log(conn_id, kind, text):
    with LOCK:
        print(f"[{conn_id}] {kind} {' '.join(text.split())}", flush=True)


def pump(conn_id, src, dst, from_client, state):
    buf = b""
    while True:
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        if not data:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        buf += data
        while True:
            if from_client and state["untyped"]:
                if len(buf) < 4:
                    break
                (n,) = struct.unpack("!I", buf[:4])
                if len(buf) < n:
                    break
                code = struct.unpack("!I", buf[4:8])[0] if n >= 8 else 0
                buf = buf[n:]
                # SSLRequest / GSSENCRequest: one untyped byte comes back, then a startup.
                state["untyped"] = code in (80877103, 80877104)
                state["single_byte_reply"] = state["untyped"]
                continue
            if not from_client and state.get("single_byte_reply"):
                if not buf:
                    break
                buf = buf[1:]
                state["single_byte_reply"] = False
                continue
            if len(buf) < 5:
                break
            kind = chr(buf[0])
            (n,) = struct.unpack("!I", buf[1:5])
            if len(buf) < 1 + n:
                break
            body = buf[5 : 1 + n]
            buf = buf[1 + n :]
            if from_client and kind == "Q":
                log(conn_id, "Q", body.rstrip(b"\0").decode(errors="replace"))
            elif from_client and kind == "P":
                sql = body.split(b"\0", 2)[1]
                log(conn_id, "P", sql.decode(errors="replace"))
            elif not from_client and kind == "E":
                fields = {}
                for part in body.split(b"\0"):
                    if part:
                        fields[chr(part[0])] = part[1:].decode(errors="replace")
                log(conn_id, "E", f"{fields.get('C')} {fields.get('M')}")
            elif VERBOSE and not (kind == "D" and not from_client):
                detail = f" {body[:80]!r}" if kind in "TCD" else ""
                log(conn_id, ">" if from_client else "<", kind + detail)
        # Logged before forwarding, so a reply is never printed before its request.
        dst.sendall(data)


def serve(listen_port, server_port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen_port))
    ls.listen(64)
    conn_id = 0
    while True:
        client, _ = ls.accept()
        conn_id += 1
        server = socket.create_connection(("127.0.0.1", server_port))
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = {"untyped": True}
        for a, b, fc in ((client, server, True), (server, client, False)):
            threading.Thread(target=pump, args=(conn_id, a, b, fc, state), daemon=True).start()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
