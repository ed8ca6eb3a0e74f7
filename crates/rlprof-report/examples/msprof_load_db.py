"""msprof-analyze's own loading of an Ascend profiler DB: the tables rlprof's report reads,
through msprof-analyze's DatabaseService (pandas DataFrames), as its recipes load them.

usage: python msprof_load_db.py FILE.db   (with msprof-analyze installed)
"""
import sys
import time

t0 = time.perf_counter()
from msprof_analyze.prof_common.database_service import DatabaseService  # noqa: E402

TABLES = ["STRING_IDS", "PYTORCH_API", "CANN_API", "MSTX_EVENTS", "TASK", "COMPUTE_TASK_INFO",
          "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO", "OP_MEMORY", "STEP_TIME"]

t1 = time.perf_counter()
service = DatabaseService(sys.argv[1], {})
for table in TABLES:
    service.add_table_for_query(table)
frames = service.query_data()
t2 = time.perf_counter()
rows = sum(len(df) for df in frames.values() if df is not None)
print(f"msprof-analyze: {rows} rows in {t2 - t1:.3f} s (import {t1 - t0:.3f} s)")
