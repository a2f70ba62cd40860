"""Parse errors and rejected input records shared by every format reader.

A reader never drops bad input silently: a file reader yields :class:`Rejected`
(with file and line) and keeps going; a decoder raises :class:`ParseError`, whose
``kind`` becomes the dead letter's ``error_kind``.

Example
-------
>>> err = ParseError("bad_number", "Reading 'x' is not a number", line=7, source="ipmi/n001.csv")
>>> err.kind, err.line, str(err)
('bad_number', 7, "ipmi/n001.csv:7: Reading 'x' is not a number")
>>> err.rejected("x").kind
'bad_number'
"""
from __future__ import annotations

from dataclasses import dataclass


class ParseError(ValueError):
    """Malformed input.

    Parameters
    ----------
    kind
        Short machine-readable kind: ``bad_header``, ``bad_row``, ``bad_number``,
        ``bad_time``, ``bad_json``, ``missing_field``, ``unknown_sensor``,
        ``unknown_schema``, ``unknown_format``, ``bad_hostlist``...
    reason
        Human-readable explanation.
    line
        1-based line number in ``source`` when known.
    source
        File or topic the input came from.
    """

    def __init__(self, kind: str, reason: str, line: int | None = None, source: str = ""):
        self.kind = kind
        self.reason = reason
        self.line = line
        self.source = source
        where = f"{source}:{line}: " if source and line is not None else (f"{source}: " if source else "")
        super().__init__(f"{where}{reason}")

    def rejected(self, payload: str, source: str | None = None, line: int | None = None) -> "Rejected":
        """The :class:`Rejected` record a file reader yields for this error."""
        return Rejected(source=source if source is not None else self.source,
                        line=line if line is not None else self.line, kind=self.kind,
                        reason=self.reason, payload=payload)


@dataclass
class Rejected:
    """An input record a reader could not use: where it was, why, and the text itself."""

    source: str
    line: int | None
    kind: str
    reason: str
    payload: str

    def dead_letter(self, now: float) -> dict:
        """A ``DeadLetter``-shaped dict (``streams/records.py``) for the DLQ topic."""
        return {"source": self.source, "reason": self.reason, "error_kind": self.kind,
                "payload": self.payload[:65536], "time": now, "offset": None, "line": self.line, "v": 1}
