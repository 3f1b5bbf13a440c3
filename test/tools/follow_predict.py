"""Reads pskv-serve's /v1/predict through real HTTP for a fixed body while it
follows a training group (test/integration/serve_follow.sh, t_serve_follow_sparse_lr).

    follow_predict.py moves PORT BODYFILE N SECONDS
        polls until N different score lists were answered (the served model moved
        as training went on); prints "moves: answers=A distinct=D"; exit 1 if fewer
        came within SECONDS
    follow_predict.py steady PORT BODYFILE SECONDS
        asks every 50 ms for SECONDS: every request must be answered (200), with one
        and the same scores (no training runs), and the staleness each answer reports
        must grow by most of SECONDS; prints "steady: answers=A staleness=S0..S1"
    follow_predict.py scores PORT BODYFILE
        prints the scores of one answer, as JSON text
"""

import json
import sys
import time
import urllib.request


def predict(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/v1/predict" % port, data=body, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def main():
    cmd, port, body = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read()
    if cmd == "scores":
        print(json.dumps(predict(port, body)["scores"]))
        return 0
    if cmd == "moves":
        want, secs = int(sys.argv[4]), float(sys.argv[5])
        seen, answers = set(), 0
        end = time.monotonic() + secs
        while time.monotonic() < end and len(seen) < want:
            try:
                got = predict(port, body)
            except OSError:  # not served yet (400: no such table before the first copy)
                time.sleep(0.05)
                continue
            answers += 1
            seen.add(json.dumps(got["scores"]))
            time.sleep(0.02)
        print("moves: answers=%d distinct=%d" % (answers, len(seen)))
        return 0 if len(seen) >= want else 1
    if cmd == "steady":
        secs = float(sys.argv[4])
        first = last = None
        answers = 0
        end = time.monotonic() + secs
        while time.monotonic() < end:
            try:
                got = predict(port, body)
            except OSError as e:
                print("steady: FAILED: a request failed after %d answers: %s" % (answers, e))
                return 1
            answers += 1
            if first is None:
                first = got
            elif got["scores"] != first["scores"]:
                print("steady: FAILED: the scores changed with no training: %s, then %s" %
                      (first["scores"], got["scores"]))
                return 1
            last = got
            time.sleep(0.05)
        s0 = first["version"]["staleness_seconds"]
        s1 = last["version"]["staleness_seconds"]
        print("steady: answers=%d staleness=%.2f..%.2f" % (answers, s0, s1))
        if s1 - s0 < secs / 2:
            print("steady: FAILED: staleness grew by %.2f s in %.1f s" % (s1 - s0, secs))
            return 1
        return 0
    print("follow_predict.py: unknown command %s" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
