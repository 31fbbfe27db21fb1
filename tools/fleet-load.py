#!/usr/bin/env python3
"""tools/fleet-test.sh's load client: closed-loop REST clients against the balancer, counting.

Each of --clients threads keeps one HTTP/1.1 keep-alive connection and sends add_sub requests one
after another (a new connection and a 50 ms pause after any error) until --stop-file exists or --max-s passes. A
request succeeds when the answer is 200 and OUTPUT0 is the sum of the inputs. Writes a JSON summary:
ok, failed, by_version (model_version of the successful answers), failures (send and end time,
what went wrong) and last_v (the send time of the last answer per version).
"""
import argparse
import http.client
import json
import os
import random
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--max-s", type=float, default=120)
    p.add_argument("--timeout-s", type=float, default=30)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    lock = threading.Lock()
    st = {"ok": 0, "failed": 0, "by_version": {}, "failures": [], "first_v": {}, "last_v": {}}
    deadline = time.time() + a.max_s

    def client(i):
        rnd = random.Random(i)
        conn = None
        while not os.path.exists(a.stop_file) and time.time() < deadline:
            x = [rnd.randint(0, 100) for _ in range(4)]
            y = [rnd.randint(0, 100) for _ in range(4)]
            body = json.dumps({"inputs": [
                {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": x},
                {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": y}]})
            t0 = time.time()
            err = None
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(a.host, a.port, timeout=a.timeout_s)
                conn.request("POST", "/v2/models/add_sub/infer", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    err = "HTTP %d %s" % (r.status, data[:200].decode("utf-8", "replace"))
                else:
                    doc = json.loads(data)
                    out = {o["name"]: o["data"] for o in doc["outputs"]}
                    if [float(v) for v in out["OUTPUT0"]] != [float(u + v) for u, v in zip(x, y)]:
                        err = "wrong OUTPUT0 %s" % out["OUTPUT0"]
                    version = str(doc.get("model_version", "?"))
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure is counted, whatever it is
                err = "%s: %s" % (type(e).__name__, e)
                if conn is not None:
                    conn.close()
                conn = None
            t1 = time.time()
            with lock:
                if err is None:
                    st["ok"] += 1
                    st["by_version"][version] = st["by_version"].get(version, 0) + 1
                    st["first_v"].setdefault(version, t0)
                    st["last_v"][version] = t0
                else:
                    st["failed"] += 1
                    st["failures"].append({"sent": t0, "ended": t1, "error": err})
            if err is not None:
                time.sleep(0.05)  # back off: a client spinning on instant errors would starve the machine
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.max_s + a.timeout_s + 5)
    with open(a.out + ".new", "w") as f:
        json.dump(st, f)
    os.replace(a.out + ".new", a.out)


if __name__ == "__main__":
    main()
