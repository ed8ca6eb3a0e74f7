//! Recorder: concurrency, caps, crash safety and faults during collection.

mod support;

use rlprof_profiler::raw::{RawReader, RawSummary};
use rlprof_profiler::record::{Kind, RangeCat};
use rlprof_profiler::{NameId, Profiler, name, op};
use std::sync::{Arc, Mutex};
use support::*;

fn ops_in(path: &std::path::Path) -> usize {
    let s = RawSummary::read(path, true).unwrap();
    s.kept
        .iter()
        .filter(|(_, r)| r.kind == Kind::Range as u8 && r.cat == RangeCat::Op as u8)
        .count()
}

#[test]
fn many_threads_recording_concurrently_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let profiler = Profiler::new(plan(
        dir.path(),
        &[1],
        false,
        role_plan(dir.path(), vec![0], false),
        1,
    ));
    let rank = profiler.rank(0);
    let _main = rank.bind_thread();
    {
        let _s = rank.step(1);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let rank = rank.clone();
                s.spawn(move || {
                    let _b = rank.bind_thread();
                    for _ in 0..50_000 {
                        let _o = op(name!("add"), NameId::NONE);
                    }
                });
            }
        });
    }
    let done = profiler.completed();
    assert_eq!(done.len(), 1);
    assert_eq!(ops_in(&done[0].raw_file), 200_000);
    let s = RawSummary::read(&done[0].raw_file, false).unwrap();
    assert_eq!(s.end.map(|e| e.1), Some(0), "no event dropped");
    assert!(s.corruption.is_none());
}

#[test]
fn event_cap_writes_a_truncation_marker_and_keeps_exactly_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let mut role = role_plan(dir.path(), vec![0], false);
    role.caps.max_events = Some(3000);
    let profiler = Profiler::new(plan(dir.path(), &[1], false, role, 1));
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    {
        let _s = rank.step(1);
        for _ in 0..10_000 {
            let _o = op(name!("mul"), NameId::NONE);
        }
    }
    let c = &profiler.completed()[0];
    assert!(c.truncated);
    let s = RawSummary::read(&c.raw_file, false).unwrap();
    let t = s.truncated.expect("truncation marker");
    assert_eq!(t.events_kept, 3000);
    assert_eq!(s.records, 3000);
}

#[test]
fn byte_cap_truncates_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut role = role_plan(dir.path(), vec![0], false);
    role.caps.max_bytes = Some(64 * 1024);
    let profiler = Profiler::new(plan(dir.path(), &[1], false, role, 1));
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    {
        let _s = rank.step(1);
        for _ in 0..20_000 {
            let _o = op(name!("mul"), NameId::NONE);
        }
    }
    let c = &profiler.completed()[0];
    assert!(c.truncated);
    assert!(c.bytes <= 64 * 1024 + 4096, "{} bytes", c.bytes);
    let s = RawSummary::read(&c.raw_file, false).unwrap();
    assert!(s.truncated.is_some());
}

/// Captures `tracing` warnings for the fault tests.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

fn with_captured_logs(f: impl FnOnce()) -> String {
    let cap = Captured::default();
    let sub = tracing_subscriber::fmt()
        .with_writer(cap.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(sub, f);
    let v = cap.0.lock().unwrap().clone();
    String::from_utf8(v).unwrap()
}

/// The "training" of the fault tests: 3 steps with work that must all run.
fn train(rank: &rlprof_profiler::RankProfiler) -> u64 {
    let mut work = 0u64;
    for step in 1..=3 {
        let _s = rank.step(step);
        for i in 0..5000u64 {
            let _o = op(name!("work"), NameId::NONE);
            work += i;
        }
    }
    work
}

#[test]
fn unwritable_save_path_warns_once_and_training_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a_file");
    std::fs::write(&file, b"x").unwrap();
    let save = file.join("profile");
    let profiler = Profiler::new(plan(
        &save,
        &[1, 2],
        false,
        role_plan(&save, vec![0], false),
        1,
    ));
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    let mut work = 0;
    let logs = with_captured_logs(|| work = train(&rank));
    assert_eq!(work, 3 * (0..5000u64).sum::<u64>());
    assert!(profiler.completed().is_empty());
    let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(
        warnings.len(),
        2,
        "one warning per skipped collection: {logs}"
    );
    assert!(
        warnings[0].contains("training continues") && warnings[0].contains("a_file"),
        "{logs}"
    );
}

#[test]
fn full_disk_disables_the_collection_with_one_warning_and_training_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    fn dev_full(_: &std::path::Path) -> std::io::Result<std::fs::File> {
        std::fs::File::options().write(true).open("/dev/full")
    }
    let profiler = Profiler::with_raw_opener(
        plan(
            dir.path(),
            &[2],
            false,
            role_plan(dir.path(), vec![0], false),
            1,
        ),
        dev_full,
    );
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    let mut work = 0;
    let logs = with_captured_logs(|| work = train(&rank));
    assert_eq!(work, 3 * (0..5000u64).sum::<u64>());
    let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{logs}");
    assert!(
        warnings[0].contains("/dev/full") || warnings[0].contains("No space"),
        "{logs}"
    );
}

#[test]
fn reader_reports_where_a_cut_file_stops() {
    let dir = tempfile::tempdir().unwrap();
    let profiler = Profiler::new(plan(
        dir.path(),
        &[1],
        false,
        role_plan(dir.path(), vec![0], false),
        1,
    ));
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    {
        let _s = rank.step(1);
        for _ in 0..10_000 {
            let _o = op(name!("mul"), NameId::NONE);
        }
    }
    let path = profiler.completed()[0].raw_file.clone();
    let bytes = std::fs::read(&path).unwrap();
    // chunk boundaries of the intact file
    let mut r = RawReader::open(&path).unwrap();
    let mut bounds = vec![r.offset()];
    while r.next().is_some() {
        bounds.push(r.offset());
    }
    assert!(bounds.len() > 4);
    let cut = (bounds[3] + bounds[4]) / 2; // inside the 4th chunk
    std::fs::write(&path, &bytes[..cut as usize]).unwrap();
    let s = RawSummary::read(&path, false).unwrap();
    let c = s.corruption.expect("corruption report");
    assert_eq!(c.offset, bounds[3]);
    assert!(c.reason.contains("truncated"), "{}", c.reason);
    // flip a byte in the 3rd chunk's payload: checksum catches it
    let mut bad = bytes.clone();
    bad[(bounds[2] + 20) as usize] ^= 0xff;
    std::fs::write(&path, &bad).unwrap();
    let s = RawSummary::read(&path, false).unwrap();
    let c = s.corruption.expect("corruption report");
    assert_eq!(c.offset, bounds[2]);
    assert!(c.reason.contains("checksum"));
}

/// Child side of the SIGKILL test: records forever, printing how many ops it has done.
#[test]
#[ignore = "run by sigkill_mid_collection_leaves_a_readable_prefix as a child process"]
fn child_recorder_forever() {
    let save = std::path::PathBuf::from(std::env::var("RLPROF_CHILD_SAVE").unwrap());
    let profiler = Profiler::new(plan(
        &save,
        &[1],
        false,
        role_plan(&save, vec![0], false),
        1,
    ));
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    let _s = rank.step(1);
    let mut n = 0u64;
    loop {
        for _ in 0..1000 {
            let _o = op(name!("forever"), NameId::NONE);
        }
        n += 1000;
        if n.is_multiple_of(200_000) {
            println!("ops {n}");
        }
        if n == 400_000 {
            // let the flusher run at least twice, then keep going until killed
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }
}

#[test]
fn sigkill_mid_collection_leaves_a_readable_prefix() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "child_recorder_forever",
            "--nocapture",
        ])
        .env("RLPROF_CHILD_SAVE", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    loop {
        let l = lines.next().expect("child output").unwrap();
        if l.starts_with("ops ") && l[4..].parse::<u64>().unwrap() >= 600_000 {
            break;
        }
    }
    // SIGKILL: no destructor, no flush at exit.
    // SAFETY: kill(2) on the child's pid with a valid signal number; no memory is involved.
    unsafe { libc_kill(child.id() as i32, 9) };
    child.wait().unwrap();
    let raw = find_raw(dir.path()).expect("raw file under the temporary directory");
    assert!(
        raw.to_string_lossy().contains(".tmp/"),
        "never renamed: {}",
        raw.display()
    );
    let s = RawSummary::read(&raw, false).unwrap();
    assert!(s.end.is_none(), "killed: no clean end marker");
    assert!(
        s.records >= 400_000,
        "flushed prefix survives: {} records",
        s.records
    );
    assert!(s.meta.is_some() && !s.calibrations.is_empty());
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn find_raw(p: &std::path::Path) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(p).ok()?.flatten() {
        let path = e.path();
        if path.is_dir() {
            if let Some(f) = find_raw(&path) {
                return Some(f);
            }
        } else if path.extension().is_some_and(|x| x == "rlraw") {
            return Some(path);
        }
    }
    None
}
