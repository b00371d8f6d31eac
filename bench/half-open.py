#!/usr/bin/env python3
# bench/half-open.py URL TOKEN: an authenticated client of sandstepd, alone
# and beside 250 half-open connections, in one run.
#
# The client makes ROUNDS requests (GET /v1/health with the token, a fresh
# connection each, as the sandstep helper makes them) in two phases,
# interleaved in blocks so that drift on a noisy machine hits both alike:
# with no other connection, and while 250 connections from 5 other loopback
# addresses (50 each) sit open having sent part of a request's headers.
# Prints one JSON object: the p50 and p99 of each phase in milliseconds, and
# how many of the half-open connections the server still held at the end.
import json, socket, sys, time

url, token = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 400
host, port = url.split("//")[1].rsplit(":", 1)
port = int(port)
request = (f"GET /v1/health HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
           "Connection: close\r\n\r\n").encode()

def one():
    start = time.perf_counter()
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(request)
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"half-open.py: the server answered {answer[:60]!r}")
    return (time.perf_counter() - start) * 1000

half_open = []
def open_half():
    for i in range(250):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.2.{1 + i % 5}", 0))
        s.connect((host, port))
        s.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")   # and never the rest
        half_open.append(s)

def still_open():
    n = 0
    for s in half_open:
        s.setblocking(False)
        try:
            n += s.recv(1) != b""
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n

def close_half():
    for s in half_open:
        s.close()
    half_open.clear()

alone, beside = [], []
for _ in range(5):                     # warm up: the first connections pay for allocations
    one()
blocks = 8
for b in range(blocks):
    for _ in range(rounds // (2 * blocks)):
        alone.append(one())
    open_half()
    for _ in range(rounds // (2 * blocks)):
        beside.append(one())
    held = still_open()
    close_half()
    time.sleep(0.2)                    # let the server see them go

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

print(json.dumps({"alone_p50_ms": pct(alone, 50), "alone_p99_ms": pct(alone, 99),
                  "beside_p50_ms": pct(beside, 50), "beside_p99_ms": pct(beside, 99),
                  "requests": len(alone) + len(beside), "half_open_held": held}))
