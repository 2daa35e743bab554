"""Asks pathd for a path across the demo town and prints its waypoints.

  /usr/bin/python3 example.py [HOST:PORT]

The address defaults to $PATHD_ADDR, else 127.0.0.1:7420 (`make run`).
pathd_pb2.py must be importable: PYTHONPATH=build/client-examples/python/gen.
"""

import os
import sys

from pathd_client import PathdClient, PathdError


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PATHD_ADDR", "127.0.0.1:7420")
    with PathdClient(addr) as client:
        try:
            path = client.find_path("town", (1, 1), (10, 5), style="corners", want_world=True)
        except PathdError as e:
            print("no path: %s" % e, file=sys.stderr)
            return 1
        print("%s: cost %g, %d expansions, scene version %d" % (
            path.status, path.cost, path.expansions, path.version))
        for (x, y), (wx, wy) in zip(path.waypoints, path.world):
            print("  cell (%d, %d)  world (%g, %g)" % (x, y, wx, wy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
