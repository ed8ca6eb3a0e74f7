//! The Ascend profiler DB layout of the `npu` tool (`tool_config.npu.export_type: db`, the
//! default, as verl 0.9.1 asks torch_npu for `ExportType.Db` with `data_simplification=True`).
//!
//! Per rank, `ASCEND_PROFILER_OUTPUT/` holds `ascend_pytorch_profiler_{rank}.db` (the events:
//! host ops, device tasks and their links, communication ops and tasks, marker ranges, steps,
//! memory, metadata; [`schema::PROFILER_TABLES`]) and `analysis.db` (per-step trace and
//! per-collective figures that msprof-analyze's cluster mode reads; [`schema::ANALYSIS_TABLES`]).
//! As with data simplification, nothing else is written there (no `trace_view.json`, no CSVs);
//! `profiler_info_{rank}.json` and `profiler_metadata.json` sit beside it as in the text layout,
//! and our raw data stays (it is the source of every layout, never deleted).
//!
//! One streaming pass as in the text exporter ([`writer`]): events are attributed and turned
//! into rows at once, inserted in bulk inside one transaction; the directory is built under a
//! `.tmp` name and renamed when complete.

pub mod batch;
pub mod read;
pub mod schema;
pub mod strings;
pub mod summary;
pub mod writer;

use crate::ExportError;
use crate::attrib::Attributor;
use crate::decode::Index;
pub use crate::npu::Layout;
use crate::npu::OUTPUT_DIR;
use crate::staging::staging_name;
use rusqlite::{Connection, params};
use std::path::{Path, PathBuf};

/// The profiler DB's file name for `rank`.
pub fn profiler_db_name(rank: u32) -> String {
    format!("ascend_pytorch_profiler_{rank}.db")
}

/// The analysis DB's file name.
pub const ANALYSIS_DB: &str = "analysis.db";

fn sql_err(path: &Path) -> impl FnOnce(rusqlite::Error) -> ExportError + '_ {
    move |source| ExportError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens a new database for one bulk write: no journal, no sync until closed (a crash leaves
/// a `.tmp` directory that the next run redoes), bounded page cache.
fn create_db(path: &Path, tables: &[schema::Table]) -> Result<Connection, ExportError> {
    let conn = Connection::open(path).map_err(sql_err(path))?;
    let mut sql = String::from(
        "PRAGMA page_size=4096; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; \
         PRAGMA locking_mode=EXCLUSIVE; PRAGMA cache_size=-16384; PRAGMA temp_store=MEMORY;",
    );
    for t in tables {
        sql.push_str(&t.create_sql());
        sql.push(';');
    }
    conn.execute_batch(&sql).map_err(sql_err(path))?;
    Ok(conn)
}

/// Writes the DB layout of one rank into the collection directory `dir`.
pub fn export(dir: &Path, idx: &Index) -> Result<Vec<PathBuf>, ExportError> {
    let mut outputs = crate::npu::write_info_files(dir, idx, Layout::Db)?;
    let final_dir = dir.join(OUTPUT_DIR);
    let tmp = staging_name(&final_dir);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(ExportError::io(&tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(ExportError::io(&tmp))?;
    let db_name = profiler_db_name(idx.meta.rank);
    let db_path = tmp.join(&db_name);
    let conn = create_db(&db_path, schema::PROFILER_TABLES)?;
    let (steps, comms) = write_profiler_db(&conn, idx, &db_path)?;
    conn.close().map_err(|(_, e)| sql_err(&db_path)(e))?;

    let an_path = tmp.join(ANALYSIS_DB);
    let an = create_db(&an_path, schema::ANALYSIS_TABLES)?;
    write_analysis_db(&an, idx, &steps, &comms).map_err(sql_err(&an_path))?;
    an.close().map_err(|(_, e)| sql_err(&an_path)(e))?;

    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(ExportError::io(&final_dir))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(ExportError::io(&final_dir))?;
    std::fs::write(final_dir.join("analyse.done"), b"").map_err(ExportError::io(&final_dir))?;
    outputs.push(final_dir.join(db_name));
    outputs.push(final_dir.join(ANALYSIS_DB));
    Ok(outputs)
}

/// The streaming pass and the tables written once at the end.
fn write_profiler_db(
    conn: &Connection,
    idx: &Index,
    path: &Path,
) -> Result<(summary::StepSums, summary::CommFigures), ExportError> {
    let e = |source| ExportError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    conn.execute_batch("BEGIN").map_err(e)?;
    let mut w = writer::Writer::new(conn, idx).map_err(e)?;
    let mut attr = Attributor::default();
    let replayed = idx.replay(|ev| attr.push(ev, &mut |o| w.push(&o)));
    attr.finish(&mut |o| w.push(&o));
    replayed?;
    let (strings, stacks, steps, comms) = w.finish().map_err(e)?;
    write_end_tables(conn, idx, &strings, &stacks).map_err(e)?;
    conn.execute_batch("COMMIT").map_err(e)?;
    Ok((steps, comms))
}

/// The tables known only once the events are through, and the fixed ones.
fn write_end_tables(
    conn: &Connection,
    idx: &Index,
    strings: &strings::Strings,
    stacks: &strings::Strings,
) -> rusqlite::Result<()> {
    let mut st = conn.prepare(&schema::STRING_IDS.insert_sql())?;
    for (id, v) in strings.rows(idx) {
        st.execute(params![id, v])?;
    }
    let mut st = conn.prepare(&schema::PYTORCH_CALLCHAINS.insert_sql())?;
    for (id, _) in stacks.rows(idx).filter(|(id, _)| *id < strings::CONST_BASE) {
        st.execute(params![id, id, 0])?;
    }
    let mut st = conn.prepare(&schema::ENUM_API_TYPE.insert_sql())?;
    for (id, name) in schema::API_TYPES {
        st.execute(params![id, name])?;
    }
    let mut st = conn.prepare(&schema::STEP_TIME.insert_sql())?;
    for s in &idx.steps {
        st.execute(params![s.step as i64, s.start as i64, s.end as i64])?;
    }
    write_meta_tables(conn, idx)
}

/// `META_DATA`, `RANK_DEVICE_MAP`, `HOST_INFO`, `SESSION_TIME_INFO`.
fn write_meta_tables(conn: &Connection, idx: &Index) -> rusqlite::Result<()> {
    let m = &idx.meta;
    let md = crate::npu::profiler_metadata(idx);
    let mut st = conn.prepare(&schema::META_DATA.insert_sql())?;
    for key in ["distributed_args", "parallel_group_info", "rlprof"] {
        st.execute(params![key, md[key].to_string()])?;
    }
    st.execute(params!["torch_npu_version", ""])?;
    st.execute(params!["rlprof_version", env!("CARGO_PKG_VERSION")])?;
    conn.execute(
        &schema::RANK_DEVICE_MAP.insert_sql(),
        params![m.rank as i64, 0],
    )?;
    conn.execute(
        &schema::HOST_INFO.insert_sql(),
        params![format!("{}_{}", m.host, m.pid), m.host],
    )?;
    let end = idx.steps.last().map_or(m.start_wall_ns, |s| s.end);
    conn.execute(
        &schema::SESSION_TIME_INFO.insert_sql(),
        params![m.start_wall_ns as i64, end as i64],
    )?;
    Ok(())
}

/// `analysis.db`: `StepTraceTime` (level0 and up) and the `CommAnalyzer*` tables (level1 and
/// up), as the text layout writes `step_trace_time.csv` and `communication*.json`.
fn write_analysis_db(
    conn: &Connection,
    idx: &Index,
    steps: &summary::StepSums,
    comms: &summary::CommFigures,
) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN")?;
    if crate::npu::level_rank(idx.meta.level) >= 0 {
        steps.write(conn, idx)?;
    }
    comms.write(conn, idx.meta.rank)?;
    conn.execute_batch("COMMIT")
}
