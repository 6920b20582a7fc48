"""A training loop without a framework, for the core's tests: it reports a falling
loss every step, and when asked to checkpoint it writes one and acknowledges it.

    python loop.py CHECKPOINT [--chain MARKER] [--max-steps N] [--step-seconds S]

`--chain MARKER` installs a SIGTERM handler of its own first, which writes MARKER; the
library must still call it.
"""

import argparse
import os
import signal
import time

parser = argparse.ArgumentParser()
parser.add_argument("checkpoint")
parser.add_argument("--chain")
parser.add_argument("--max-steps", type=int, default=100_000)
parser.add_argument("--step-seconds", type=float, default=0.01)
args = parser.parse_args()

if args.chain:
    def previous_handler(signum, frame):
        with open(args.chain, "w") as f:
            f.write(f"signal {signum}\n")

    signal.signal(signal.SIGTERM, previous_handler)

import switchyard_train as sy  # noqa: E402 - after the handler the library must chain

sy.session()
for step in range(args.max_steps):
    time.sleep(args.step_seconds)
    sy.report(step, 1.0 / (step + 1))
    if sy.checkpoint_requested():
        partial = args.checkpoint + ".partial"
        with open(partial, "w") as f:
            f.write(f"{step}\n")
        os.replace(partial, args.checkpoint)
        sy.acknowledge(args.checkpoint, step)
        break
