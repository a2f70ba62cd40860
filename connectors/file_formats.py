"""Which recorded format a file holds, from its name and first lines (:func:`detect_format`).

Below both readers of recorded files: the replay into Kafka (``connectors.replay``) and the
offline loader (``connectors.recorded``) detect formats alike, and the loader's counts
(``connectors.replay.dry_run``) use the loader's arrays, so neither may import the other for it.
"""
from __future__ import annotations

from pathlib import Path

from hpcguard.connectors.canario_io import PROBE_FIELDS
from hpcguard.connectors.errors import ParseError
from hpcguard.connectors.fasrc import is_archive
from hpcguard.connectors.ipmi import detect_ipmi_format
from hpcguard.connectors.ldms import find_altheader, parse_layout
from hpcguard.connectors.sacct import JOB_ID_COLUMNS, SacctDialect
from hpcguard.connectors.slurm_events import is_event_dump

FILE_FORMATS = ("store_csv", "freeipmi", "ipmitool", "telegraf", "sacct", "sacctmgr-event", "probes", "sdr-archive")
# a detected IPMI text format → its reader's name (connectors.ipmi.read_ipmi_file)
IPMI_FORMATS = {"freeipmi": "freeipmi-csv", "ipmitool": "ipmitool-sdr", "telegraf": "telegraf-lp"}
PROBE_HEADER = ",".join(PROBE_FIELDS)   # CanarIO probes.csv (connectors.canario_io)


def is_sacct_header(line: str, delimiter: str = "|") -> bool:
    """Whether ``line`` is a sacct header: ``JobID`` or ``JobIDRaw`` and ``State`` among its columns.

    >>> is_sacct_header("Account|AdminComment|JobID|JobIDRaw|NodeList|State|Submit")
    True
    >>> is_sacct_header("JobID;State", delimiter=";"), is_sacct_header("JobID|JobName")
    (True, False)
    """
    cols = {c.strip() for c in line.rstrip("\r\n").split(delimiter)}
    return "State" in cols and not cols.isdisjoint(JOB_ID_COLUMNS)


def is_store_csv_header(line: str) -> bool:
    """Whether ``line`` is a ``store_csv`` header of any variant (``#Time``, ``#Time_msec``, quoted names).

    >>> is_store_csv_header('"#Time_msec","Time_usec","ProducerName","component_id"')
    True
    """
    if not line.startswith(("#", '"#')):
        return False
    try:
        parse_layout(line)
    except ParseError:
        return False
    return True


def detect_format(path: Path, sacct: SacctDialect | None = None) -> str | None:
    """One of :data:`FILE_FORMATS` from a file's first lines, or ``None``.

    ``sacct``: the dialect whose delimiter a sacct header is split by (default ``|``).
    """
    if path.name.endswith(".HEADER") or ".HEADER." in path.name:
        return None
    if is_archive(path):
        return "sdr-archive"
    try:
        with open(path, errors="replace") as fh:
            head = [line for _, line in zip(range(20), fh)]
    except OSError:
        return None
    if not head:
        return None
    first = head[0]
    if is_store_csv_header(first) or (not first.startswith("#") and find_altheader(path) is not None):
        return "store_csv"
    if is_sacct_header(first, (sacct or SacctDialect()).delimiter):
        return "sacct"
    if first.strip() == PROBE_HEADER:
        return "probes"
    if is_event_dump(head):
        return "sacctmgr-event"
    ipmi = detect_ipmi_format(head)
    return {v: k for k, v in IPMI_FORMATS.items()}.get(ipmi) if ipmi else None


def slurm_dumps(data_dir: str | Path, fmt: str = "sacct") -> list[Path]:
    """The files under ``DIR/slurm`` whose content is ``fmt`` (``sacct`` dumps, ``sacctmgr-event``
    node events), in name order."""
    slurm, dialect = Path(data_dir, "slurm"), SacctDialect.from_settings()  # the site's sacct delimiter
    return [f for f in sorted(slurm.glob("*")) if f.is_file() and detect_format(f, dialect) == fmt] if slurm.is_dir() else []
