"""The ``hpcguard`` command line.

The command groups, ``emit_json`` and ``fail`` live in ``cli/common.py``; each area registers
its commands on them from its own module (``cli/<area>.py``), imported here, so heavy imports
(torch, faust) happen only when a command runs.
"""
from __future__ import annotations

import sys

# Areas register their commands on the groups of cli/common.py.
from hpcguard.cli import (  # noqa: F401
    adapter,
    canario,
    cluster,
    demo,
    failure,
    label,
    online,
    ops,
    pipeline,
    policies,
    replay,
    report,
    savings,
    simulate,
    sites,
    slurm,
)
from hpcguard.cli.common import (  # noqa: F401  (the command line's API: tests and scripts import these)
    app,
    checkpoint_app,
    config_app,
    emit_json,
    evaluate_app,
    fail,
    failures_app,
    fars_app,
    simulate_app,
    trace_app,
    train_app,
)


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
