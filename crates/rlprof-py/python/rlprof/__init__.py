"""rlprof in Python: the figures of ``rlprof report`` as pandas DataFrames.

``rlprof.load(path)`` reads what ``rlprof report`` reads (rlprof collections, PyTorch / kineto
Chrome traces, torch_npu text and DB output) and returns a :class:`Report` whose tables are
DataFrames. The figures are the very ones ``rlprof report PATH --format json`` prints: the
analysis runs once, in Rust (the ``rlprof`` command's own code); this module only parses that
JSON and reshapes its lists of records into DataFrames. Nothing is recomputed here; where a
table is given under HolisticTraceAnalysis's names, the only arithmetic is a change of unit
(ns to us, a fraction to percent).

>>> import rlprof
>>> r = rlprof.load("outputs/profile")              # doctest: +SKIP
>>> r.get_temporal_breakdown()                      # doctest: +SKIP
>>> r.roles                                         # doctest: +SKIP
>>> rlprof.report("outputs/profile", out="report.html")   # doctest: +SKIP

Every list of records in the JSON report is a table in :attr:`Report.tables`, named by its
place in the JSON (``breakdown``, ``ops``, ``ranks``, ``ranks.kernel_types``, ...; see
:attr:`Report.tables`), so a table the report gains later appears here without a change to
this module.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

import pandas as pd

from . import _native

__all__ = ["Report", "load", "report", "__version__"]

__version__: str = _native.__version__

#: A file or directory path.
PathLike = Union[str, "os.PathLike[str]"]

# Top-level lists of plain values, not tables (when empty they would look like one).
_NOT_TABLES = ("notes",)

# The report's CANN step columns under the names of CANN's step_trace_time.csv.
_CANN_NAMES = {
    "computing_ns": "Computing",
    "communication_not_overlapped_ns": "Communication(Not Overlapped)",
    "overlapped_ns": "Overlapped",
    "communication_ns": "Communication",
    "free_ns": "Free",
    "stage_ns": "Stage",
    "bubble_ns": "Bubble",
    "communication_not_overlapped_exclude_receive_ns": "Communication(Not Overlapped and Exclude Receive)",
    "preparing_ns": "Preparing",
}

# Columns that identify a parent row, carried into the tables of its nested lists.
_KEYS = ("job", "run", "step", "rank", "profile", "index", "kind", "name")


def load(path: PathLike) -> "Report":
    """Loads and summarises ``path`` as ``rlprof report`` does and returns the :class:`Report`.

    ``path``: a save_path, step directory or collection of ours, a ``*.pt.trace.json[.gz]``
    (or any Chrome trace), a torch_npu ``*_ascend_pt`` directory (text or DB layout), or a
    directory holding several of them. Inputs that could not be read are listed in
    ``Report.skipped`` and each is reported with :func:`warnings.warn`.

    Raises ``RuntimeError`` (with ``rlprof report``'s message) when nothing can be read.
    """
    text = _native.report_json(os.fspath(path))
    r = Report(json.loads(text), source=Path(os.fspath(path)))
    for s in r.json.get("skipped", []):
        warnings.warn(f"rlprof: skipped {s.get('path')}: {s.get('reason')}", stacklevel=2)
    return r


def report(
    path: PathLike, out: PathLike = "report.html", force: bool = False, ranks: Optional[Iterable[int]] = None
) -> Path:
    """Writes the self-contained HTML report of ``path`` to ``out`` and returns ``out``.

    The page ``rlprof report PATH -o OUT [--ranks R,...]`` writes. An existing ``out`` is
    replaced only with ``force=True``; a file inside a collection's raw data (``rlprof_raw/``)
    never is. ``ranks``: on a cluster page (more than 8 ranks), the ranks whose timelines are
    kept besides rank 0, the slowest and the fastest. Raises ``RuntimeError`` with the
    command's message on failure.
    """
    _native.report_html(os.fspath(path), os.fspath(out), force, [int(r) for r in (ranks or [])])
    return Path(os.fspath(out))


def _is_records(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _flatten(rec: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """One record with nested objects spread into ``parent.child`` columns; lists stay cells."""
    out: Dict[str, Any] = {}
    for k, v in rec.items():
        if isinstance(v, dict) and not _is_foreign_table(v):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _is_foreign_table(v: Any) -> bool:
    return isinstance(v, dict) and set(v) >= {"columns", "rows"}


def _frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """A DataFrame of records, integer columns kept exact (``Int64`` where a value is null)."""
    rows = [_flatten(r) for r in records]
    columns = list(dict.fromkeys(k for r in rows for k in r))
    data = {c: [r.get(c) for r in rows] for c in columns}
    df = pd.DataFrame({c: pd.Series(v, dtype=_dtype(v)) for c, v in data.items()}, columns=columns)
    df.index = pd.RangeIndex(len(rows))
    return df


def _dtype(values: List[Any]) -> Optional[str]:
    present = [v for v in values if v is not None]
    if not present:
        return "object"
    if all(isinstance(v, bool) for v in present):
        return "bool" if len(present) == len(values) else "boolean"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "int64" if len(present) == len(values) else "Int64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float64"
    return "object"


def _collect(name: str, records: List[Dict[str, Any]], out: Dict[str, List[Dict[str, Any]]]) -> None:
    """Adds the rows of table ``name`` to ``out`` and, for each nested list of records, the rows
    of table ``name.field``, each with its parent's key columns (``_KEYS``)."""
    nested = list(
        dict.fromkeys(k for r in records for k, v in r.items() if v and _is_records(v) and not _is_foreign_list(v))
    )
    rows = out.setdefault(name, [])
    for r in records:
        rows.append({k: v for k, v in r.items() if k not in nested})
        keys = {k: v for k, v in r.items() if k in _KEYS and not isinstance(v, (list, dict))}
        for k in nested:
            if _is_records(r.get(k)):
                _collect(f"{name}.{k}", [{**keys, **child} for child in r[k]], out)


def _is_foreign_list(v: List[Any]) -> bool:
    return bool(v) and all(_is_foreign_table(x) for x in v)


class Report:
    """The report of one path: its tables as pandas DataFrames.

    ``json`` is the report exactly as ``rlprof report PATH --format json`` prints it, parsed.
    Times are integer nanoseconds (columns ending ``_ns``) unless a column's name says ``(us)``;
    bytes are bytes. Named tables (properties below) are views of :attr:`tables`.
    """

    def __init__(self, data: Dict[str, Any], source: Optional[Path] = None) -> None:
        #: The JSON report (``rlprof report --format json``), parsed.
        self.json: Dict[str, Any] = data
        #: The path it was loaded from.
        self.source: Optional[Path] = source
        self._tables: Optional[Dict[str, pd.DataFrame]] = None

    def __repr__(self) -> str:
        ranks = sum(len(j.get("ranks", [])) for j in self.json.get("jobs", []))
        return (
            f"<rlprof.Report {self.source}: {len(self.json.get('jobs', []))} job(s), "
            f"{ranks} rank(s), {len(self.json.get('inputs', []))} input(s); tables: "
            f"{', '.join(self.tables)}>"
        )

    # --- generic ---------------------------------------------------------------------------

    @property
    def tables(self) -> Dict[str, pd.DataFrame]:
        """Every list of records in the JSON report, as a DataFrame, by its place in the JSON.

        - a top-level list (``breakdown``, ``ops``, ``top``, ``memory``, ``comm``, ``coverage``,
          ``inputs``, ``skipped``, and any the report gains) is the table of its name;
        - ``jobs[].ranks[]`` is ``ranks``, each row with its job's columns (``job`` = the job's
          ``id``, ``world_size``, ``format``...);
        - a list of records inside a table's rows is the table ``TABLE.FIELD``
          (``ranks.steps``, ``ranks.kernel_types``, ``memory.at_peak``, ...), each row with its
          parent's key columns (job, run, step, rank, profile, index, kind, name where the
          parent has them); a list under an object is ``OBJECT.FIELD`` (``compare.top``);
        - a nested object is spread into dotted columns (``device.kernel_ns``,
          ``temporal.idle_pct``, ``roles.update_actor``); other lists stay as cells.
        """
        if self._tables is None:
            raw: Dict[str, List[Dict[str, Any]]] = {}
            for key, value in self.json.items():
                if key == "jobs" and _is_records(value):
                    jobs = [{("job" if k == "id" else k): v for k, v in j.items() if k != "ranks"} for j in value]
                    _collect("jobs", jobs, raw)
                    _collect("ranks", [{**job, **r} for job, j in zip(jobs, value) for r in j.get("ranks", [])], raw)
                elif _is_records(value) and key not in _NOT_TABLES:
                    _collect(key, value, raw)
                elif isinstance(value, dict):
                    for k, v in value.items():
                        if _is_records(v):
                            _collect(f"{key}.{k}", v, raw)
            self._tables = {k: _frame(v) for k, v in raw.items()}
        return self._tables

    def table(self, name: str) -> pd.DataFrame:
        """The table ``name`` of :attr:`tables` (a copy)."""
        return self.tables[name].copy()

    @property
    def notes(self) -> List[str]:
        """The report's notes (what it could not determine, and why)."""
        return list(self.json.get("notes", []))

    def foreign_tables(self) -> Dict[str, pd.DataFrame]:
        """Tables the inputs carry as their producer wrote them (e.g. CANN's
        ``step_trace_time.csv``), by ``"INPUT_INDEX:TITLE"``; cells are text as found."""
        out: Dict[str, pd.DataFrame] = {}
        for inp in self.json.get("inputs", []):
            for t in inp.get("tables", []):
                out[f"{inp.get('index')}:{t['title']}"] = pd.DataFrame(t["rows"], columns=t["columns"])
        return out

    # --- named views -----------------------------------------------------------------------

    def _ranks(self, prefix: str) -> pd.DataFrame:
        df = self.tables["ranks"]
        cols = [c for c in df.columns if c.startswith(prefix)]
        out = df[["job", "rank"] + cols].copy()
        out.columns = ["job", "rank"] + [c[len(prefix):] for c in cols]
        return out

    @property
    def device(self) -> pd.DataFrame:
        """Per-rank device time (ns): ``kernel_ns`` (union of compute kernels), ``comm_ns``
        (collectives), ``memcpy_ns`` (copies and sets), ``busy_ns`` (union of all device
        activity), ``idle_ns`` (``span_ns`` - ``busy_ns``), ``span_ns``, ``events``."""
        return self._ranks("device.")

    @property
    def temporal(self) -> pd.DataFrame:
        """HTA's temporal breakdown per rank in the report's own columns (ns, percent)."""
        return self._ranks("temporal.")

    @property
    def overlap(self) -> pd.DataFrame:
        """Communication/computation overlap per rank: ``comm_ns``, ``overlapped_ns``,
        ``ratio`` (``overlapped_ns / comm_ns``)."""
        return self._ranks("overlap.")

    def get_temporal_breakdown(self) -> pd.DataFrame:
        """HTA's ``TraceAnalysis.get_temporal_breakdown()`` columns, one row per rank:
        ``rank``, ``idle_time(us)``, ``compute_time(us)``, ``non_compute_time(us)``,
        ``kernel_time(us)``, ``idle_time_pctg``, ``compute_time_pctg``,
        ``non_compute_time_pctg``, then ``job``. The report's ns divided by 1000; percentages
        as the report gives them (HTA rounds them to 2 decimals, and its times to whole us).
        Unlike HTA, every device event counts, also those outside complete profiler steps."""
        t = self.temporal
        return pd.DataFrame(
            {
                "rank": t["rank"],
                "idle_time(us)": t["idle_ns"] / 1e3,
                "compute_time(us)": t["compute_ns"] / 1e3,
                "non_compute_time(us)": t["non_compute_ns"] / 1e3,
                "kernel_time(us)": t["total_ns"] / 1e3,
                "idle_time_pctg": t["idle_pct"],
                "compute_time_pctg": t["compute_pct"],
                "non_compute_time_pctg": t["non_compute_pct"],
                "job": t["job"],
            }
        )

    def get_comm_comp_overlap(self) -> pd.DataFrame:
        """HTA's ``get_comm_comp_overlap()``: ``rank``, ``comp_comm_overlap_pctg`` (the report's
        ``overlap.ratio`` in percent; empty without collectives), then ``job``."""
        o = self.overlap
        return pd.DataFrame({"rank": o["rank"], "comp_comm_overlap_pctg": pd.to_numeric(o["ratio"]) * 100.0, "job": o["job"]})

    def get_gpu_kernel_breakdown(self) -> pd.DataFrame:
        """HTA's kernel-type table of ``get_gpu_kernel_breakdown()``, per rank: ``rank``,
        ``kernel_type`` (COMPUTATION, COMMUNICATION, MEMORY), ``count``, ``sum`` (us),
        ``percentage``, ``job``. The report's ``ranks.kernel_types``."""
        k = self.tables.get("ranks.kernel_types")
        cols = ["rank", "kernel_type", "count", "sum", "percentage", "job"]
        if k is None or k.empty:
            return pd.DataFrame(columns=cols)
        return pd.DataFrame(
            {
                "rank": k["rank"],
                "kernel_type": k["kind"],
                "count": k["count"],
                "sum": k["sum_ns"] / 1e3,
                "percentage": k["pct"],
                "job": k["job"],
            }
        )[cols]

    @property
    def cann_steps(self) -> pd.DataFrame:
        """CANN's step figures per (job, profile, rank, step) in the report's columns (ns):
        ``computing_ns``, ``communication_not_overlapped_ns``, ``overlapped_ns``,
        ``communication_ns``, ``free_ns``, ``stage_ns``, ``bubble_ns``, ``preparing_ns``...,
        and ``source`` (CANN's own table, or computed by CANN's rules). Empty when the report has
        none."""
        return self.table("cann_steps") if "cann_steps" in self.tables else pd.DataFrame()

    def get_step_trace_time(self) -> pd.DataFrame:
        """:attr:`cann_steps` under the names of CANN's ``step_trace_time.csv`` (what
        msprof-analyze and MindStudio Insight show), in us: ``rank``, ``Step``, ``Computing``,
        ``Communication(Not Overlapped)``, ``Overlapped``, ``Communication``, ``Free``,
        ``Stage``, ``Bubble``, ``Communication(Not Overlapped and Exclude Receive)``,
        ``Preparing``, then ``job``, ``profile``, ``source``. A figure the report adds later keeps
        its own name (``NAME_ns`` / 1000 as ``NAME(us)``)."""
        c = self.cann_steps
        if c.empty:
            return pd.DataFrame(columns=["rank", "Step", *_CANN_NAMES.values(), "job", "profile", "source"])
        out = pd.DataFrame({"rank": c["rank"], "Step": c["step"]})
        for col in c.columns:
            if col.endswith("_ns"):
                out[_CANN_NAMES.get(col, f"{col[:-3]}(us)")] = pd.to_numeric(c[col]) / 1e3
        for col in ("job", "profile", "source"):
            if col in c.columns:
                out[col] = c[col]
        return out

    @property
    def steps(self) -> pd.DataFrame:
        """The step breakdown: one row per (job, run, step, rank) with ``step_ns``, the time of
        each role call (``roles.NAME``), phase (``phases.NAME``) and device class
        (``device.NAME``), ``other_ns``, the role groups and ``slowest``."""
        return self.table("breakdown")

    @property
    def roles(self) -> pd.DataFrame:
        """Per-step role breakdown: ``rollout_ns`` (generation), ``log_prob_ns`` (log-prob and
        value passes), ``update_ns`` (actor / critic updates), ``other_ns`` and ``step_ns`` per
        (job, run, step, rank), with ``slowest``."""
        b = self.tables["breakdown"]
        cols = ["job", "run", "step", "rank", "step_ns", "rollout_ns", "log_prob_ns", "update_ns", "other_ns", "slowest"]
        return b[[c for c in cols if c in b.columns]].copy()

    @property
    def slowest_rank(self) -> pd.DataFrame:
        """The slowest rank of each step (the report's rule: the highest step time, the lowest
        rank on a tie): the ``steps`` rows marked ``slowest``."""
        b = self.tables["breakdown"]
        if b.empty:
            return b.copy()
        return b[b["slowest"].astype(bool)].reset_index(drop=True)

    @property
    def ops(self) -> pd.DataFrame:
        """Ops per (job, kind, name, rank, role): ``count``, ``total_ns``, ``self_ns``,
        ``max_ns``."""
        return self.table("ops")

    @property
    def top(self) -> pd.DataFrame:
        """The top ops and kernels over all ranks: ``count``, ``total_ns``, ``self_ns``,
        ``mean_ns``, ``max_ns``, ``share`` (of the job's summed self time)."""
        return self.table("top")

    @property
    def kernels(self) -> pd.DataFrame:
        """The rows of :attr:`top` that run on the device (kinds ``kernel``, ``comm``,
        ``memcpy``)."""
        t = self.tables["top"]
        if t.empty:
            return t.copy()
        return t[t["kind"].isin(["kernel", "comm", "memcpy"])].reset_index(drop=True)

    @property
    def comm(self) -> pd.DataFrame:
        """Collectives per (profile, rank, name): ``count``, ``bytes``, ``total_ns``,
        ``wait_ns``, ``bandwidth_gbps`` (GB/s) and whether it includes the wait."""
        return self.table("comm")

    @property
    def memory(self) -> pd.DataFrame:
        """Memory per profile: ``peak_bytes``, when (``peak_t_ns``, ``peak_since_start_ns``),
        ``final_bytes``, the baseline; the ops allocated at the peak are ``memory.at_peak`` in
        :attr:`tables`, the curve is :attr:`memory_timeline`."""
        m = self.table("memory")
        return m.drop(columns=[c for c in ("curve",) if c in m.columns])

    @property
    def memory_timeline(self) -> pd.DataFrame:
        """The memory curve of every profile, long form: ``profile``, ``rank``, ``kind``,
        ``t_ns``, ``bytes`` (the report's points, as the page draws them)."""
        rows = [
            (m.get("profile"), m.get("rank"), m.get("kind"), t, b)
            for m in self.json.get("memory", [])
            for t, b in m.get("curve", [])
        ]
        df = pd.DataFrame(rows, columns=["profile", "rank", "kind", "t_ns", "bytes"])
        for c in ("profile", "rank", "t_ns", "bytes"):
            df[c] = df[c].astype("int64")
        return df

    @property
    def inputs(self) -> pd.DataFrame:
        """What was read: one row per input (``index`` is the ``profile`` of other tables)."""
        return self.table("inputs")

    @property
    def skipped(self) -> pd.DataFrame:
        """Inputs that could not be read, with the reason."""
        return self.table("skipped")
