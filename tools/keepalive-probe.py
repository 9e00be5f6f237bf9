#!/usr/bin/env python3
"""Sends requests of the test suite's kinds over a few kept-alive connections, each the moment the last
answer arrived, and counts those left unanswered within the timeout (a server that stopped reading a
connection). Standard library only.

  python3 tools/keepalive-probe.py [--url http://127.0.0.1:8080] [--requests 3000] [--connections 3] [--timeout 5]
"""
import argparse, http.client, json, random, struct, sys, time, urllib.parse

IRIS = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
BERT = {"inputs": [{"name": "input_ids", "shape": [2, 4], "datatype": "INT64", "data": [[2, 7, 9, 3], [2, 5, 3, 0]]},
                   {"name": "attention_mask", "shape": [2, 4], "datatype": "INT64", "data": [[1, 1, 1, 1], [1, 1, 1, 0]]}],
        "outputs": [{"name": "pooler_output"}]}
JSON = {"Content-Type": "application/json"}


def requests():
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4],
                                     "parameters": {"binary_data_size": 32}}],
                         "parameters": {"binary_data_output": True}}).encode()
    binary = header + struct.pack("<8f", 5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3)
    return [
        ("POST", "/v2/models/iris-mlp/infer", json.dumps(IRIS), JSON),
        ("POST", "/v2/models/tiny-bert/infer", json.dumps(BERT), JSON),
        ("POST", "/v2/models/tiny-bert/infer",   # refused: token outside the vocabulary
         json.dumps({"inputs": [{"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [5, 100000]}]}), JSON),
        ("POST", "/v2/models/iris-mlp/infer", binary,
         {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))}),
        ("POST", "/v2/repository/index", None, {}),
        ("GET", "/v2/health/ready", None, {}),
        ("GET", "/v2/models/tiny-bert", None, {}),
        ("GET", "/v2/models/iris-mlp/config", None, {}),
        ("GET", "/v2", None, {}),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    url = urllib.parse.urlparse(args.url)
    random.seed(args.seed)
    kinds = requests()

    def connect():
        return http.client.HTTPConnection(url.hostname, url.port or 80, timeout=args.timeout)

    connections = [connect() for _ in range(args.connections)]
    previous = [None] * args.connections
    unanswered = 0
    started = time.time()
    for i in range(args.requests):
        method, path, body, headers = random.choice(kinds)
        c = random.randrange(args.connections)
        try:
            connections[c].request(method, path, body=body, headers=headers)
            response = connections[c].getresponse()
            response.read()
            previous[c] = f"{method} {path} {response.status}"
        except (TimeoutError, OSError) as e:
            unanswered += 1
            print(f"request {i}: {method} {path} unanswered ({type(e).__name__}) after {previous[c]}", flush=True)
            connections[c].close()
            connections[c] = connect()
            previous[c] = None
    print(json.dumps({"requests": args.requests, "connections": args.connections, "unanswered": unanswered,
                      "seconds": round(time.time() - started, 1)}))
    return 1 if unanswered else 0


if __name__ == "__main__":
    sys.exit(main())
