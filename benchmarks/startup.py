"""Start-up time of the ``ragvet`` command, against a bare Python start in the same run.

    python benchmarks/startup.py [--rounds 15]

Prints the best wall time over interleaved rounds of ``ragvet --help``,
``ragvet evaluate --help`` and ``python -c pass`` (the floor no CLI can beat),
and the modules over 20 ms that ``import ragvet.cli`` pulls in (``-X importtime``).
Target: ``ragvet --help`` under 0.5 s, with numpy, polars, torch and faiss loaded
only by the stage that needs them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time


def best(command: list[str], times: dict[str, float], name: str) -> None:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    times[name] = min(times.get(name, float("inf")), time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    ragvet = shutil.which("ragvet") or sys.exit("ragvet is not on PATH: pip install -e .")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "ragvet --help": [ragvet, "--help"],
        "ragvet evaluate --help": [ragvet, "evaluate", "--help"],
    }
    times: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, command in commands.items():
            best(command, times, name)
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; best of {args.rounds} interleaved rounds\n")
    print(f"{'command':<26}{'seconds':>9}{'over python':>13}")
    for name, seconds in times.items():
        print(f"{name:<26}{seconds:>9.3f}{seconds - times['python -c pass']:>13.3f}")
    print(f"\nragvet --help: {times['ragvet --help']:.3f} s (target < 0.5)")
    trace = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import ragvet.cli"], capture_output=True, text=True
    )
    heavy = []
    for line in trace.stderr.splitlines()[1:]:
        _, cumulative, module = line.split("|")
        if int(cumulative) > 20_000 and module.strip().count(".") == 0:
            heavy.append(f"{module.strip()} {int(cumulative) / 1000:.0f} ms")
    print("top-level imports over 20 ms under `import ragvet.cli`: " + (", ".join(heavy) or "none"))


if __name__ == "__main__":
    main()
