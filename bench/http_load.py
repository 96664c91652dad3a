"""What loomd's HTTP port costs under many connections (a benchmark, not a test).

  http_load.py --port 8080 --pid PID [--idle 1000] [--streams 1000] [--max_tokens 16]

1. Opens --idle idle TCP connections and times 50 GET /healthz on a fresh
   connection beside them (a kubelet probe waits 1 s by default).
2. Opens --streams concurrent streamed /v1/completions (SSE) at once, each
   asking for --max_tokens tokens, and samples loomd's resident memory and
   thread count (/proc/PID/status) while they are open. Reports how many
   completed with [DONE], the peak RSS and threads against before, and the
   wall time.
"""
import argparse
import asyncio
import json
import statistics
import time
import urllib.request


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                fields[key] = int(value.split()[0])
    return fields  # VmRSS in KiB


def healthz_ms(port, calls=50):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            reply.read()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.99 * len(times)) - 1], times[-1]


async def idle(port, count, pid):
    before = proc_status(pid)
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]
    await asyncio.sleep(1)
    during = proc_status(pid)
    p50, p99, worst = await asyncio.to_thread(healthz_ms, port)
    print(f"idle: {count} connections open: +{(during['VmRSS'] - before['VmRSS']) / 1024:.1f} MiB "
          f"RSS, threads {before['Threads']} -> {during['Threads']}; /healthz p50 {p50:.2f} ms, "
          f"p99 {p99:.2f} ms, max {worst:.2f} ms")
    for _, writer in conns:
        writer.close()


async def stream(port, max_tokens, index):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": f"Story {index}: once upon a time", "max_tokens": max_tokens,
                       "stream": True, "ignore_eos": True, "temperature": 0})
    writer.write((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return b"data: [DONE]" in data


async def streams(port, count, max_tokens, pid):
    before = proc_status(pid)
    peak = dict(before)
    start = time.perf_counter()
    tasks = [asyncio.create_task(stream(port, max_tokens, i)) for i in range(count)]
    while not all(t.done() for t in tasks):
        now = proc_status(pid)
        peak = {k: max(peak[k], now[k]) for k in peak}
        await asyncio.sleep(0.2)
    done = sum(t.result() for t in tasks)
    print(f"streams: {done}/{count} SSE streams of {max_tokens} tokens ended with [DONE] in "
          f"{time.perf_counter() - start:.1f} s; peak RSS +{(peak['VmRSS'] - before['VmRSS']) / 1024:.1f}"
          f" MiB, threads {before['Threads']} -> peak {peak['Threads']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--pid", type=int, required=True, help="loomd's process id")
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--max_tokens", type=int, default=16)
    args = parser.parse_args()
    if args.idle:
        asyncio.run(idle(args.port, args.idle, args.pid))
    if args.streams:
        asyncio.run(streams(args.port, args.streams, args.max_tokens, args.pid))


if __name__ == "__main__":
    main()
