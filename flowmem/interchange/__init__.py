"""The JSONL interchange format and the files that carry it: input files, spool files, the
quarantine and the unsaved-runs file."""

from flowmem.interchange.jsonl import (
    RecordError,
    Rejection,
    dump_record,
    iter_lines,
    loads,
    parse_line,
    parse_record,
    read_trajectories,
    write_jsonl,
    write_lines,
)
from flowmem.interchange.spool import pending_files, write_spool_file

__all__ = [
    "RecordError",
    "Rejection",
    "dump_record",
    "iter_lines",
    "loads",
    "parse_line",
    "parse_record",
    "read_trajectories",
    "pending_files",
    "write_jsonl",
    "write_lines",
    "write_spool_file",
]
