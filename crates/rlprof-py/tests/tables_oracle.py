"""An independent reading of the JSON report, to hold the DataFrames to: each table's rows and
cells straight from the JSON (`rlprof report --format json`), written without the module's code."""

from typing import Any, Dict, Iterator, List, Tuple

import pandas as pd


def leaves(rec: Dict[str, Any], prefix: str = "") -> Iterator[Tuple[str, Any]]:
    """(dotted column, value) of a record: objects spread, lists kept whole."""
    for k, v in rec.items():
        if isinstance(v, dict) and not {"columns", "rows"} <= set(v):
            yield from leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def records_of(report: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    """The top-level tables of the JSON report as lists of records (ranks flattened from jobs)."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for key, value in report.items():
        if key == "jobs":
            out["ranks"] = [
                {"job": job["id"], **{k: v for k, v in job.items() if k not in ("id", "ranks")}, **rank}
                for job in value
                for rank in job["ranks"]
            ]
        elif isinstance(value, list) and key != "notes":
            out[key] = value
    return out


def same_cell(got: Any, want: Any) -> bool:
    if want is None:
        return got is None or (not isinstance(got, (list, dict)) and bool(pd.isna(got)))
    if isinstance(want, (list, dict)):
        return got == want
    if isinstance(want, bool):
        return bool(got) is want and not pd.isna(got)
    return not pd.isna(got) and got == want and type(want)(got) == want


def assert_table_equals(df: pd.DataFrame, records: List[Dict[str, Any]], name: str) -> int:
    """Every leaf of every record equals its cell (same row order); returns cells checked. A
    list of records inside a record is checked against the table `name.field` by the caller."""
    assert len(df) == len(records), f"{name}: {len(df)} rows, JSON has {len(records)}"
    n = 0
    for i, rec in enumerate(records):
        for col, want in leaves(rec):
            if isinstance(want, list) and want and all(isinstance(x, dict) for x in want):
                continue
            assert col in df.columns, f"{name}: no column {col}"
            got = df[col].iloc[i]
            assert same_cell(got, want), f"{name}[{i}].{col}: DataFrame {got!r}, JSON {want!r}"
            n += 1
    return n


def nested(records: List[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """The lists of records inside records, concatenated in row order, by field."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for rec in records:
        for k, v in rec.items():
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and not all(
                {"columns", "rows"} <= set(x) for x in v
            ):
                out.setdefault(k, []).extend(v)
    return out


def assert_report_equals(report, j: Dict[str, Any]) -> int:
    """Every table of `report` (an rlprof.Report) holds exactly the JSON report `j`'s figures;
    returns the number of cells compared."""
    n = 0
    tables = report.tables
    for name, recs in records_of(j).items():
        assert name in tables, f"table {name} missing ({sorted(tables)})"
        n += assert_table_equals(tables[name], recs, name)
        for field, children in nested(recs).items():
            child = f"{name}.{field}"
            assert child in tables, f"table {child} missing"
            df = tables[child]
            # The child's own columns equal the JSON's; the parent's key columns come first.
            n += assert_table_equals(df, children, child)
    return n
