//! Collected data survives crashes and concurrent tools, end to end through the binary:
//! - a training killed at several moments (SIGKILL, a crash, SIGINT, SIGTERM, a failing rank),
//!   with collections in flight: `rlprof analyse` then parses every raw file and marks the
//!   interrupted collections partial;
//! - `rlprof analyse` runs racing each other and a training's automatic analysis end in the
//!   state of one clean analysis;
//! - off a terminal, `analyse` prints failures with file and byte offset and `train` prints
//!   one plain line per step, without ANSI codes;
//! - `report -o` never replaces a file without `--force`, nor writes into raw data.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rlprof");

/// A short single-rank job profiling steps 1-3 with no warm-up, so that collections are in
/// flight from the start; each step sleeps `slow` inside its profiling scope.
fn train_cmd(root: &Path, slow: &str) -> Command {
    let mut c = Command::new(BIN);
    c.args(["train", "--quiet"])
        .args([
            format!("global_profiler.save_path={}", root.join("prof").display()),
            "global_profiler.steps=[1,2,3]".into(),
            "trainer.total_training_steps=3".into(),
            "trainer.sft_warmup_steps=0".into(),
            "trainer.n_gpus_per_node=1".into(),
            format!("trainer.default_local_dir={}", root.join("ckpt").display()),
            "data.train_batch_size=4".into(),
            "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
            "actor_rollout_ref.rollout.n=2".into(),
            "actor_rollout_ref.model.hidden_size=32".into(),
            "actor_rollout_ref.model.num_hidden_layers=2".into(),
            "actor_rollout_ref.model.intermediate_size=64".into(),
        ])
        .env("RLPROF_TEST_SLOW_RANK", format!("0:{slow}"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Directories at or below `root` (sorted).
fn dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(e.path());
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn collections(root: &Path) -> Vec<PathBuf> {
    dirs(root)
        .into_iter()
        .filter(|d| d.join("rlprof_raw").is_dir())
        .collect()
}

fn unfinished_with_data(root: &Path) -> usize {
    collections(root)
        .iter()
        .filter(|d| d.to_string_lossy().ends_with(".tmp"))
        .filter(|d| {
            std::fs::read_dir(d.join("rlprof_raw"))
                // More than the 16-byte header: the metadata chunk is there.
                .map(|rd| {
                    rd.flatten()
                        .any(|e| e.metadata().is_ok_and(|m| m.len() > 64))
                })
                .unwrap_or(false)
        })
        .count()
}

fn finished(root: &Path) -> usize {
    collections(root)
        .iter()
        .filter(|d| !d.to_string_lossy().ends_with(".tmp"))
        .count()
}

fn wait_for(what: &str, child: &mut Child, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        if let Ok(Some(s)) = child.try_wait() {
            panic!("{what}: the training ended first ({s})");
        }
        assert!(t0.elapsed() < Duration::from_secs(240), "{what}: timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: sends a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

fn analyse(path: &Path) -> Output {
    Command::new(BIN).arg("analyse").arg(path).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn marker(dir: &Path) -> serde_json::Value {
    let p = dir.join("rlprof_analysis.json");
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// How a run ends.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SIGKILL once the first collection is in flight.
    KillFirst,
    /// SIGKILL once the second collection is in flight.
    KillSecond,
    /// The process `_exit`s at the start of step 2 (a crash, no clean-up).
    CrashSecond,
    /// SIGINT once the second collection is in flight.
    IntSecond,
    /// SIGTERM once the first collection is in flight.
    TermFirst,
    /// A rank fails with an error at step 2.
    ErrorSecond,
}

/// Runs one interrupted training in `root`; returns whether a collection was open when it
/// stopped by signal or crash (then it must end up partial).
fn interrupted_run(root: &Path, stop: Stop) -> bool {
    let prof = root.join("prof");
    let mut cmd = train_cmd(root, "700ms");
    match stop {
        Stop::CrashSecond => {
            cmd.env("RLPROF_TEST_FAIL_RANK", "0:2:exit");
        }
        Stop::ErrorSecond => {
            cmd.env("RLPROF_TEST_FAIL_RANK", "0:2");
        }
        _ => {}
    }
    let mut child = cmd.spawn().unwrap();
    let first = || unfinished_with_data(&prof) > 0;
    let second = || finished(&prof) >= 1 && unfinished_with_data(&prof) > 0;
    let want_code = match stop {
        Stop::KillFirst => {
            wait_for("first collection", &mut child, first);
            child.kill().unwrap();
            None
        }
        Stop::KillSecond => {
            wait_for("second collection", &mut child, second);
            child.kill().unwrap();
            None
        }
        Stop::IntSecond => {
            wait_for("second collection", &mut child, second);
            signal(&child, libc::SIGINT);
            Some(130)
        }
        Stop::TermFirst => {
            wait_for("first collection", &mut child, first);
            signal(&child, libc::SIGTERM);
            Some(143)
        }
        Stop::CrashSecond => Some(3),
        Stop::ErrorSecond => Some(1),
    };
    let out = child.wait_with_output().unwrap();
    if let Some(code) = want_code {
        assert_eq!(
            out.status.code(),
            Some(code),
            "{stop:?}: {}",
            text(&out.stderr)
        );
    }
    if matches!(stop, Stop::IntSecond | Stop::TermFirst) {
        assert_eq!(
            unfinished_with_data(&prof),
            0,
            "{stop:?}: the open collection was closed before exiting"
        );
        assert!(
            text(&out.stderr).contains("closed early"),
            "{}",
            text(&out.stderr)
        );
    }
    !matches!(stop, Stop::ErrorSecond)
}

/// The `npu` tool's default output (`export_type: db`): `ascend_pytorch_profiler_{rank}.db`.
fn has_ascend_db(collection: &Path) -> bool {
    std::fs::read_dir(collection.join("ASCEND_PROFILER_OUTPUT"))
        .map(|d| {
            d.flatten().any(|e| {
                rlprof_report::ascend_db_reader::is_db_name(&e.file_name().to_string_lossy())
            })
        })
        .unwrap_or(false)
}

#[test]
fn interrupted_trainings_are_recovered_and_marked_partial() {
    let stops = [
        Stop::KillFirst,
        Stop::KillSecond,
        Stop::CrashSecond,
        Stop::IntSecond,
        Stop::TermFirst,
        Stop::ErrorSecond,
    ];
    let roots: Vec<tempfile::TempDir> =
        stops.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let open_at_stop: Vec<bool> = std::thread::scope(|sc| {
        let hs: Vec<_> = stops
            .iter()
            .zip(&roots)
            .map(|(s, r)| sc.spawn(move || interrupted_run(r.path(), *s)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((stop, root), open) in stops.iter().zip(&roots).zip(open_at_stop) {
        let prof = root.path().join("prof");
        let out = analyse(&prof);
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stop:?}: {so}\n{se}");
        let colls = collections(&prof);
        assert!(!colls.is_empty(), "{stop:?}");
        let mut partial = Vec::new();
        for c in &colls {
            assert!(
                !c.to_string_lossy().ends_with(".tmp"),
                "{stop:?}: {} left unfinished\n{se}",
                c.display()
            );
            let m = marker(c);
            for f in m["files"].as_array().unwrap() {
                assert!(c.join(f.as_str().unwrap()).exists(), "{stop:?}: {f}");
            }
            assert!(
                has_ascend_db(c),
                "{stop:?}: no profiler DB in {}",
                c.display()
            );
            if m["partial"] == true {
                let w = std::fs::read_to_string(c.join("rlprof_warnings.txt")).unwrap();
                assert!(w.starts_with("NOTE: partial collection"), "{w}");
                let md: serde_json::Value = serde_json::from_slice(
                    &std::fs::read(c.join("profiler_metadata.json")).unwrap(),
                )
                .unwrap();
                assert_eq!(md["partial"], true);
                partial.push(c.clone());
            }
        }
        if open {
            assert_eq!(
                partial.len(),
                1,
                "{stop:?}: the collection in flight is partial, the finished ones are not: {colls:?}\n{se}"
            );
            assert_eq!(
                partial[0],
                *colls
                    .iter()
                    .max_by_key(|c| c.parent().unwrap().parent().unwrap().to_path_buf())
                    .unwrap(),
                "{stop:?}: the last step's collection"
            );
        }
        // A second analysis has nothing left to do.
        let again = analyse(&prof);
        assert!(text(&again.stdout).contains("nothing to do"), "{stop:?}");
    }
}

/// A copy of the raw inputs of every collection below `from` (nothing parsed), under `to`.
fn copy_raw_only(from: &Path, to: &Path) {
    for c in collections(from) {
        let rel = c.strip_prefix(from).unwrap();
        let dst = to.join(rel).join("rlprof_raw");
        std::fs::create_dir_all(&dst).unwrap();
        for e in std::fs::read_dir(c.join("rlprof_raw")).unwrap().flatten() {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
}

/// Every file below `root` with its content, the root path inside replaced.
fn snapshot(root: &Path) -> Vec<(String, String)> {
    let prefix = root.to_string_lossy().into_owned();
    let mut out: Vec<(String, String)> = dirs(root)
        .into_iter()
        .chain([root.to_path_buf()])
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten().collect::<Vec<_>>())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let body = text(&std::fs::read(e.path()).unwrap()).replace(&prefix, "ROOT");
            (rel, body)
        })
        .collect();
    out.sort();
    out
}

fn assert_same_tree(got: &Path, want: &Path, what: &str) {
    let (a, b) = (snapshot(got), snapshot(want));
    let names = |v: &[(String, String)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b), "{what}: same files");
    for ((n, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{what}: {n} differs");
    }
}

#[test]
fn concurrent_analyses_and_automatic_analysis_end_like_one_clean_run() {
    let root = tempfile::tempdir().unwrap();
    let prof = root.path().join("prof");
    // A training with automatic analysis, and two `analyse` loops on its tree meanwhile.
    let child = train_cmd(root.path(), "300ms").spawn().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let out = std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let o = analyse(&prof);
                    let se = text(&o.stderr);
                    assert!(!se.contains("error:"), "{se}");
                }
            });
        }
        let out = child.wait_with_output().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    });
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{so}\n{se}");
    // Off a terminal: one plain verl-style line per step, no colour codes.
    for s in 1..=3 {
        assert!(so.contains(&format!("step:{s} - ")), "{so}");
    }
    assert!(
        !so.contains('\u{1b}') && !se.contains('\u{1b}'),
        "{so}\n{se}"
    );
    let last = analyse(&prof);
    assert!(last.status.success(), "{}", text(&last.stderr));

    let clean = tempfile::tempdir().unwrap();
    copy_raw_only(&prof, clean.path());
    let o = analyse(clean.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(collections(clean.path()).len(), 3);
    assert_same_tree(&prof, clean.path(), "training + 2 analyses");

    // Four `analyse` processes at once on an unparsed copy.
    let raced = tempfile::tempdir().unwrap();
    copy_raw_only(&prof, raced.path());
    let outs: Vec<Output> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4).map(|_| sc.spawn(|| analyse(raced.path()))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outs {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    assert_same_tree(raced.path(), clean.path(), "4 analyses");
}

#[test]
fn piped_analyse_names_file_and_offset_of_damaged_data() {
    let root = tempfile::tempdir().unwrap();
    let out = train_cmd(root.path(), "0ms")
        .arg("actor_rollout_ref.actor.profiler.tool_config.npu.analysis=false")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let prof = root.path().join("prof");
    let colls = collections(&prof);
    let raw = |c: &Path| c.join("rlprof_raw/rank_0.rlraw");
    // Cut one raw file inside a chunk, and make another unreadable from its first byte.
    let cut = raw(&colls[0]);
    let len = std::fs::metadata(&cut).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&cut).unwrap();
    f.set_len(len - 10).unwrap();
    std::fs::write(raw(&colls[1]), b"garbage, not a raw file").unwrap();
    let o = analyse(&prof);
    let se = text(&o.stderr);
    assert!(!o.status.success());
    assert!(se.contains(&cut.display().to_string()), "{se}");
    assert!(se.contains("byte offset"), "{se}");
    let bad = format!("error: {}", colls[1].display());
    assert!(
        se.contains(&bad),
        "the failure has its own plain line: {se}"
    );
    assert!(se.contains(&raw(&colls[1]).display().to_string()), "{se}");
    assert!(!se.contains('\u{1b}'), "{se}");
}

#[test]
fn report_output_is_never_replaced_without_force_nor_put_into_raw_data() {
    let root = tempfile::tempdir().unwrap();
    let out = train_cmd(root.path(), "0ms").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let prof = root.path().join("prof");
    let report = |o: &Path, force: bool| {
        let mut c = Command::new(BIN);
        c.arg("report")
            .arg(&prof)
            .args(["--format", "text", "-o"])
            .arg(o);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    let existing = root.path().join("notes.txt");
    std::fs::write(&existing, "mine").unwrap();
    let o = report(&existing, false);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--force"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine");
    let o = report(&existing, true);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_ne!(std::fs::read_to_string(&existing).unwrap(), "mine");
    // Raw data is off limits, --force or not.
    let c = &collections(&prof)[0];
    let raw = c.join("rlprof_raw/rank_0.rlraw");
    let before = std::fs::read(&raw).unwrap();
    for target in [raw.clone(), c.join("rlprof_raw/new.txt")] {
        let o = report(&target, true);
        assert!(!o.status.success(), "{}", target.display());
        assert!(text(&o.stderr).contains("raw data"), "{}", text(&o.stderr));
    }
    assert_eq!(std::fs::read(&raw).unwrap(), before);
    assert!(!c.join("rlprof_raw/new.txt").exists());
}
