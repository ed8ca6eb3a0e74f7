//! Inputs the fuzz targets (`fuzz/`, docs/fuzzing.md) found that crashed a reader, reduced to
//! what triggered the crash.

use rlprof_report::Limits;
use rlprof_report::model::{Profile, SourceFormat, Track};
use std::path::{Path, PathBuf};

/// `chrome_json`: an op whose `ts + dur` passes the largest i64 nanosecond overflowed (a panic
/// in a debug build, a wrapped end in a release one) where ops were matched to memory events.
#[test]
fn a_chrome_op_ending_past_i64_is_clamped() {
    let trace = r#"{"traceEvents":[
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":9000000000000000,"dur":9000000000000000},
{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":-5,"dur":9223372036854775},
{"ph":"B","name":"outer","pid":1,"tid":1,"ts":-9000000000000000},
{"ph":"E","name":"outer","pid":1,"tid":1,"ts":9000000000000000},
{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":9000000000000001,
 "args":{"Bytes":1024,"Addr":1,"Total Allocated":1024,"Total Reserved":2048,"Device Id":0}}
]}"#;
    let path = Path::new("crash.pt.trace.json");
    let mut p = Profile::new(PathBuf::from(path), SourceFormat::TorchTrace, 0, "g".into());
    rlprof_report::chrome_reader::read_stream(trace.as_bytes(), path, &mut p, &Limits::default())
        .unwrap();
    let ops: Vec<_> = p.events.iter().filter(|e| e.track == Track::Op).collect();
    assert_eq!(ops.len(), 2, "{:?}", p.events);
    for e in &p.events {
        assert!(e.dur >= 0, "{e:?}");
        assert!(e.start.checked_add(e.dur).is_some(), "{e:?}");
    }
    assert!(
        ops.iter().any(|e| e.end() == i64::MAX),
        "the end past i64 is clamped to its last ns: {ops:?}"
    );
}

/// `ascend_csv`: a kernel name whose first bytes end inside a multi-byte character
/// (`gemm_…`, 6 bytes into a 3-byte character) panicked where names are tested for a
/// `MEMCPY`/`MEMSET` prefix.
#[test]
fn a_device_name_with_a_multibyte_character_at_the_prefix_length() {
    use rlprof_report::device_names::device_track;
    assert_eq!(device_track("gemm_\u{fffd}gemm_f32", None), Track::Kernel);
    assert_eq!(
        device_track("\u{fffd}\u{fffd}", Some("AI_CORE")),
        Track::Kernel
    );
    assert_eq!(device_track("MemCpy_async", None), Track::Memcpy);
    assert_eq!(device_track("memset\u{fffd}", None), Track::Memcpy);
}

/// Found by the `ascend_db` fuzz target: times at the ends of i64 in a torch_npu DB overflowed
/// `start - origin` and `end - start` (a panic with overflow checks, a wrapped time without).
/// They saturate: the DB loads and no duration is negative.
#[test]
fn db_times_at_the_ends_of_i64_do_not_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    let db = out.join("ascend_pytorch_profiler_0.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(&format!(
        "CREATE TABLE STRING_IDS (id INTEGER, value TEXT);
         INSERT INTO STRING_IDS VALUES (1, 'aten::mm');
         CREATE TABLE SESSION_TIME_INFO (startTimeNs INTEGER, endTimeNs INTEGER);
         INSERT INTO SESSION_TIME_INFO VALUES ({max}, {max});
         CREATE TABLE PYTORCH_API (startNs INTEGER, endNs INTEGER, globalTid INTEGER, connectionId INTEGER, name INTEGER, type INTEGER);
         INSERT INTO PYTORCH_API VALUES ({min}, {max}, 1, 1, 1, 0), ({max}, {min}, 1, 2, 1, 0);
         CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, taskType INTEGER, streamId INTEGER);
         INSERT INTO TASK VALUES ({min}, {max}, 0, 1, 7, 1, 3);",
        min = i64::MIN,
        max = i64::MAX
    ))
    .unwrap();
    drop(c);
    let loaded = rlprof_report::load(tmp.path(), &Limits::default()).unwrap();
    for p in &loaded.profiles {
        assert!(p.events.iter().all(|e| e.dur >= 0));
    }
    let _ = rlprof_report::summarise(&loaded);
}
