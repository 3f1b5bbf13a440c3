"""A group of one worker opens dense table `w` of namespace NS with WIDTH floats a
row, pulls it (every value must be 0: a fresh table), pushes ones (updater sum),
pulls again (every value must be 1) and ends its group. For pskvctl drop's test:
after a drop the same name opens afresh, with other options.

    ns_width.py SCHEDULER GROUP NS WIDTH

Prints "ns_width ok: NS/w width WIDTH, 0 then 1" and exits 0; else prints the
error (an open refused: the options differ from the table's) and exits 1.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np  # noqa: E402

import pskv  # noqa: E402


def main():
    sched, group, ns, width = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    size = 64
    try:
        with pskv.Worker(scheduler=sched, group=group, group_size=1, table_namespace=ns,
                         join_timeout_s=60) as w:
            t = w.table("w", size=size, width=width, updater="sum")
            got = t.pull().wait()
            if got.shape != (size * width,) or np.any(got != 0):
                print("ns_width: %s/w not fresh: %s" % (ns, got[:8]))
                return 1
            t.push(np.ones(size * width, dtype=np.float32)).wait()
            got = t.pull().wait()
            if np.any(got != 1):
                print("ns_width: %s/w after one push of ones: %s" % (ns, got[:8]))
                return 1
    except Exception as e:  # the refusal is the test's other outcome
        print("ns_width: %s" % e)
        return 1
    print("ns_width ok: %s/w width %d, 0 then 1" % (ns, width))
    return 0


if __name__ == "__main__":
    sys.exit(main())
