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
//! into rows at once, appended to the database file as they come ([`crate::sqlite_file`]); the directory is built under a
//! `.tmp` name and renamed when complete.

pub mod schema;
pub mod strings;
pub mod summary;
pub mod template;
pub mod writer;

use crate::ExportError;
use crate::attrib::Attributor;
use crate::decode::Index;
pub use crate::npu::Layout;
use crate::npu::OUTPUT_DIR;
use crate::sqlite_file::{Database, Value};
use rlprof_profiler::collection::staging::staging_name;
use std::path::{Path, PathBuf};

/// The profiler DB's file name for `rank`.
pub fn profiler_db_name(rank: u32) -> String {
    format!("ascend_pytorch_profiler_{rank}.db")
}

/// The analysis DB's file name.
pub const ANALYSIS_DB: &str = "analysis.db";

/// Creates a new database file holding `tables`, empty. Nothing is synced until it is
/// complete: a crash leaves a `.tmp` directory that the next run redoes.
fn create_db(path: &Path, tables: &[schema::Table]) -> Result<Database, ExportError> {
    Database::create(path, tables).map_err(ExportError::io(path))
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
    let mut db = create_db(&db_path, schema::PROFILER_TABLES)?;
    let (steps, comms) = write_profiler_db(&mut db, idx, &db_path)?;
    db.finish().map_err(ExportError::io(&db_path))?;

    let an_path = tmp.join(ANALYSIS_DB);
    let mut an = create_db(&an_path, schema::ANALYSIS_TABLES)?;
    write_analysis_db(&mut an, idx, steps, &comms).map_err(ExportError::io(&an_path))?;
    an.finish().map_err(ExportError::io(&an_path))?;

    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(ExportError::io(&final_dir))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(ExportError::io(&final_dir))?;
    rlprof_profiler::collection::safe_fs::write(&final_dir.join("analyse.done"), b"")
        .map_err(ExportError::io(&final_dir))?;
    outputs.push(final_dir.join(db_name));
    outputs.push(final_dir.join(ANALYSIS_DB));
    Ok(outputs)
}

/// The streaming pass and the tables written once at the end.
fn write_profiler_db(
    db: &mut Database,
    idx: &Index,
    path: &Path,
) -> Result<(summary::StepSums, summary::CommFigures), ExportError> {
    let mut w = writer::Writer::new(db, idx);
    let mut attr = Attributor::default();
    let replayed = idx.replay(|ev| attr.push(ev, &mut |o| w.push(&o)));
    attr.finish(&mut |o| w.push(&o));
    replayed?;
    let (strings, stacks, steps, comms) = w.finish().map_err(ExportError::io(path))?;
    write_end_tables(db, idx, &strings, &stacks).map_err(ExportError::io(path))?;
    Ok((steps, comms))
}

/// Inserts `rows` into the table `t` of `db`.
fn insert_all<'v>(
    db: &mut Database,
    t: schema::Table,
    rows: impl IntoIterator<Item = Vec<Value<'v>>>,
) -> std::io::Result<()> {
    let table = db.table_index(t.name);
    for row in rows {
        db.insert(table, &row)?;
    }
    Ok(())
}

/// The tables known only once the events are through, and the fixed ones.
fn write_end_tables(
    db: &mut Database,
    idx: &Index,
    strings: &strings::Strings,
    stacks: &strings::Strings,
) -> std::io::Result<()> {
    insert_all(db, schema::STRING_IDS, strings.rows(idx).map(id_text))?;
    let chains = stacks.rows(idx).filter(|(id, _)| *id < strings::CONST_BASE);
    let chain = |(id, _)| vec![Value::Int(id), Value::Int(id), Value::Int(0)];
    insert_all(db, schema::PYTORCH_CALLCHAINS, chains.map(chain))?;
    let types = schema::API_TYPES.iter().map(|(id, name)| (*id, *name));
    insert_all(db, schema::ENUM_API_TYPE, types.map(id_text))?;
    let steps = idx.steps.iter().map(|s| {
        let v = [s.step as i64, s.start as i64, s.end as i64];
        v.map(Value::Int).to_vec()
    });
    insert_all(db, schema::STEP_TIME, steps)?;
    write_meta_tables(db, idx)
}

/// An `(id, text)` row.
fn id_text((id, v): (i64, &str)) -> Vec<Value<'_>> {
    vec![Value::Int(id), Value::Text(v)]
}

/// `META_DATA`, `RANK_DEVICE_MAP`, `HOST_INFO`, `SESSION_TIME_INFO`.
fn write_meta_tables(db: &mut Database, idx: &Index) -> std::io::Result<()> {
    let m = &idx.meta;
    let md = crate::npu::profiler_metadata(idx);
    let md: Vec<(&str, String)> = ["distributed_args", "parallel_group_info", "rlprof"]
        .into_iter()
        .map(|key| (key, md[key].to_string()))
        .chain([
            ("torch_npu_version", String::new()),
            ("rlprof_version", env!("CARGO_PKG_VERSION").to_string()),
        ])
        .collect();
    let md = md.iter().map(|(k, v)| vec![Value::Text(k), Value::Text(v)]);
    insert_all(db, schema::META_DATA, md)?;
    let device_map = vec![Value::Int(m.rank as i64), Value::Int(0)];
    insert_all(db, schema::RANK_DEVICE_MAP, [device_map])?;
    let uid = format!("{}_{}", m.host, m.pid);
    insert_all(
        db,
        schema::HOST_INFO,
        [vec![Value::Text(&uid), Value::Text(&m.host)]],
    )?;
    let end = idx.steps.last().map_or(m.start_wall_ns, |s| s.end);
    let session = [m.start_wall_ns as i64, end as i64]
        .map(Value::Int)
        .to_vec();
    insert_all(db, schema::SESSION_TIME_INFO, [session])
}

/// `analysis.db`: `StepTraceTime` (level0 and up) and the `CommAnalyzer*` tables (level1 and
/// up), as the text layout writes `step_trace_time.csv` and `communication*.json`.
fn write_analysis_db(
    db: &mut Database,
    idx: &Index,
    steps: summary::StepSums,
    comms: &summary::CommFigures,
) -> std::io::Result<()> {
    if crate::npu::level_rank(idx.meta.level) >= 0 {
        steps.write(db, idx)?;
    }
    comms.write(db, idx.meta.rank)
}
