//! The Ascend profiler DB layout read back: the same collection exported as DB and as text
//! (raw data removed, so only the Ascend outputs are read) gives the report the same figures,
//! and the DB gives the figures of the raw data itself.

mod support;

use rlprof_export::ascend_db_writer::Layout;
use rlprof_export::decode::Index;
use rlprof_report::model::Track;
use rlprof_report::{Report, load, summarise};
use std::collections::BTreeMap;
use std::path::Path;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Copies of every collection under `run` into `to`, exported in `layout`, raw data removed.
fn exported(run: &Path, to: &Path, layout: Layout) {
    for dir in rlprof_export::analyse::find_collections(run).unwrap() {
        let dst = to.join(dir.strip_prefix(run).unwrap());
        copy_tree(&dir, &dst);
        for raw in rlprof_export::analyse::raw_files(&dst) {
            let idx = Index::build(&raw).unwrap();
            rlprof_export::ascend_writer::export_as(&dst, &idx, layout).unwrap();
        }
        std::fs::remove_dir_all(dst.join("rlprof_raw")).unwrap();
    }
}

/// Step time per (rank, step).
fn steps(r: &Report) -> BTreeMap<(u32, String), Option<u64>> {
    r.breakdown
        .iter()
        .map(|s| ((s.rank, s.step.clone()), s.step_ns))
        .collect()
}

/// (count, total, self) per (track, name, rank) for the given tracks.
fn ops(r: &Report, tracks: &[Track]) -> BTreeMap<(Track, String, u32), (u64, u64, u64)> {
    let mut m: BTreeMap<(Track, String, u32), (u64, u64, u64)> = BTreeMap::new();
    for o in r.ops.iter().filter(|o| tracks.contains(&o.kind)) {
        let e = m.entry((o.kind, o.name.clone(), o.rank)).or_default();
        e.0 += o.count;
        e.1 += o.total_ns;
        e.2 += o.self_ns;
    }
    m
}

/// (count, bytes, total, wait) of one collective.
type CommFigures = (u64, Option<u64>, u64, Option<u64>);

/// The figures per (rank, op).
fn comm(r: &Report) -> BTreeMap<(u32, String), CommFigures> {
    r.comm
        .iter()
        .map(|c| {
            (
                (c.rank, c.name.clone()),
                (c.count, c.bytes, c.total_ns, c.wait_ns),
            )
        })
        .collect()
}

fn peaks(r: &Report) -> BTreeMap<u32, i64> {
    r.memory.iter().map(|m| (m.rank, m.peak_bytes)).collect()
}

#[test]
fn db_layout_reads_back_the_figures_of_the_raw_data_and_of_the_text_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    support::collect(&run, &[1, 2], false, 3);
    let (db, text) = (tmp.path().join("db"), tmp.path().join("text"));
    exported(&run, &db, Layout::Db);
    exported(&run, &text, Layout::Text);
    let limits = Default::default();
    let load_sum = |p: &Path| summarise(&load(p, &limits).unwrap());
    let (raw_r, db_r, text_r) = (load_sum(&run), load_sum(&db), load_sum(&text));
    assert_eq!(db_r.inputs.len(), 4, "2 ranks x 2 steps");
    assert!(
        db_r.inputs
            .iter()
            .all(|i| i.path.extension().is_some_and(|e| e == "db"))
    );

    // The DB against the raw data: everything the report shows.
    assert_eq!(steps(&db_r), steps(&raw_r));
    let all = [
        Track::Op,
        Track::Kernel,
        Track::Comm,
        Track::RoleCall,
        Track::Phase,
    ];
    assert_eq!(ops(&db_r, &all), ops(&raw_r, &all));
    assert_eq!(comm(&db_r), comm(&raw_r));
    assert_eq!(peaks(&db_r), peaks(&raw_r));

    // The two layouts: step times, kernels, and the count and total time of every op. (The
    // text layout's reader also shows each collective as a host op, from its `cpu_op` event in
    // trace_view.json, and its op self times differ by up to 0.05%: not compared here.)
    assert_eq!(steps(&db_r), steps(&text_r));
    assert_eq!(ops(&db_r, &[Track::Kernel]), ops(&text_r, &[Track::Kernel]));
    // Memory: the same peak.
    assert!(!db_r.memory.is_empty());
    assert_eq!(peaks(&db_r), peaks(&text_r));
    let text_ops = ops(&text_r, &[Track::Op]);
    let db_ops = ops(&db_r, &[Track::Op]);
    assert!(!db_ops.is_empty());
    for (k, (count, total, _)) in db_ops {
        let t = text_ops
            .get(&k)
            .unwrap_or_else(|| panic!("{k:?} missing from the text layout"));
        assert_eq!((count, total), (t.0, t.1), "{k:?}");
    }
}

#[test]
fn a_db_file_given_alone_loads_with_the_rank_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    support::collect(&run, &[1], false, 2);
    let db = tmp.path().join("db");
    exported(&run, &db, Layout::Db);
    let file = walk(&db)
        .into_iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n == "ascend_pytorch_profiler_1.db")
        })
        .expect("rank 1's DB");
    let loaded = load(&file, &Default::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 1);
    let p = &loaded.profiles[0];
    assert_eq!(p.rank, 1);
    assert_eq!(p.steps, [1]);
    assert!(p.events.iter().any(|e| e.track == Track::Kernel));
    assert!(p.events.iter().any(|e| e.track == Track::RoleCall));
}

fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

/// verl 0.9.1 puts its stage ranges in mstx's default domain (`mstx_profile.py`:
/// `mstx.range_start(message)`), and so does rlprof's DB: read back, a stage label there is a
/// role call, and the user's own ranges beside it stay user ranges, a method name
/// (`update_actor`) included; the trainer's phases (the `rlprof` domain) stay phases.
#[test]
fn stage_ranges_in_the_default_domain_are_told_from_user_ranges() {
    use rlprof_profiler::plan::RoleCall;
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let profiler = rlprof_profiler::Profiler::new(support::plan(&run, &[1], false));
    let rank = profiler.rank(0);
    {
        let _b = rank.bind_thread();
        let _s = rank.step(1);
        let _p = rlprof_profiler::phase("update_actor");
        let _c = rank.role_call(RoleCall::UpdateActor);
        let _mb = rlprof_profiler::api::label(format_args!("mini_batch0"));
        let _tb = rlprof_profiler::api::label(format_args!("train_batch"));
        let _mine = rlprof_profiler::scope(rlprof_profiler::intern("my_region"));
        let _method = rlprof_profiler::scope(rlprof_profiler::intern("update_actor"));
        let t0 = rlprof_profiler::now();
        kernel_spin();
        rlprof_profiler::kernel(
            rlprof_profiler::name!("gemm"),
            t0,
            rlprof_profiler::now(),
            1,
            1,
        );
    }
    drop(rank);
    let db = tmp.path().join("db");
    exported(&run, &db, Layout::Db);
    let loaded = load(&db, &Default::default()).unwrap();
    let p = &loaded.profiles[0];
    let tracks = |name: &str| -> Vec<Track> {
        let mut t: Vec<Track> = p
            .events
            .iter()
            .filter(|e| p.str(e.name) == name)
            .map(|e| e.track)
            .collect();
        t.sort();
        t
    };
    assert_eq!(tracks("actor_update"), [Track::RoleCall]);
    assert_eq!(tracks("my_region"), [Track::User]);
    assert_eq!(tracks("train_batch"), [Track::User]);
    assert_eq!(tracks("mini_batch0"), [Track::User]);
    let mut both = vec![Track::Phase, Track::User];
    both.sort();
    assert_eq!(tracks("update_actor"), both);
}

fn kernel_spin() {
    let t = std::time::Instant::now();
    while t.elapsed().as_micros() < 50 {
        std::hint::spin_loop();
    }
}
