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
