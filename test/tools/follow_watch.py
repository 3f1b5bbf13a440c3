"""Watches pskv-serve following a `--app check` job (test/integration/serve_follow.sh)
through real HTTP: every /v1/lookup of check.dense must be one state the table
held (the sums after k whole rounds, app_check.c's dense_sum, for one k), never
half of two; the job ending must leave check.dense at its last round and
check.sparse's shared keys at theirs (sparse_sum), exactly.

    follow_watch.py PORT ROUNDS WORKERS SECONDS [--strict]

Polls until the final state is served or SECONDS pass. --strict: a failed HTTP
request fails the watch (a training server's death must not show). Prints
"watch: answers=N states=S last=K failures=F" and exits 0 when the final state
was served and no answer was torn, else 1 with the reason.
"""

import json
import sys
import time
import urllib.request

M64 = (1 << 64) - 1
NDENSE = 100  # keys of check.dense looked at (of 1000)


def mix64(z):
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def dense_sum(W, k, i, c):
    """app_check.c's dense_sum in closed form."""
    a = 15 * (k // 5) + sum(j % 5 + 1 for j in range(k - k % 5, k))
    return (W * k if i % 3 == 0 else 0) + a * W * (W + 1) // 2 + W * k * ((i + c) % 7)


def sparse_sum(W, k, j, c):
    """app_check.c's sparse_sum in closed form."""
    b = 6 * (k // 4) + sum(r % 4 for r in range(k - k % 4, k))
    return k * W * (W + 1) // 2 + W * b + W * k * (j % 5 + c)


def lookup(port, table, keys):
    body = json.dumps({"table": table, "keys": keys}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/lookup" % port, data=body, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def main():
    port, rounds, W, secs = (int(x) for x in sys.argv[1:5])
    strict = "--strict" in sys.argv
    # the rounds k a dense answer may show, by key 1's first component
    by_key1 = {dense_sum(W, k, 1, 0): k for k in range(rounds + 1)}
    skeys = [mix64(j + 12345) for j in range(1000)]
    sfinal = [[sparse_sum(W, rounds, j, c) for c in range(2)] for j in range(1000)]
    answers = failures = 0
    seen = set()
    last = -1
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            got = lookup(port, "check.dense", list(range(NDENSE)))
        except OSError as e:  # down (restarting), or not served yet (503)
            failures += 1
            if strict and answers:
                print("watch: FAILED: a request failed while following: %s" % e)
                return 1
            time.sleep(0.05)
            continue
        answers += 1
        v = got["values"]
        k = by_key1.get(v[1][0])
        if k is None or v != [[dense_sum(W, k, i, c) for c in range(3)] for i in range(NDENSE)]:
            print("watch: FAILED: check.dense served a state training never held "
                  "(clock %s): key 0 %s, key 1 %s, key 2 %s" %
                  (got["version"]["clock"], v[0], v[1], v[2]))
            return 1
        seen.add(k)
        last = k
        if k == rounds:
            try:
                s = lookup(port, "check.sparse", skeys)["values"]
            except OSError:
                continue
            if s == sfinal:
                print("watch: answers=%d states=%d last=%d failures=%d" %
                      (answers, len(seen), last, failures))
                return 0
        time.sleep(0.02)
    print("watch: FAILED: the final state was not served within %d s (answers=%d states=%d "
          "last=%d failures=%d)" % (secs, answers, len(seen), last, failures))
    return 1


if __name__ == "__main__":
    sys.exit(main())
