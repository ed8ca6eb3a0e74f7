use super::*;
use crate::raw::RawWriter;

fn rec(ts: u64, kind: Kind, cat: u8, name: u32) -> Record {
    Record {
        ts,
        a: ts + 5,
        name,
        kind: kind as u8,
        cat,
        aux: 0,
    }
}

/// The pairing rule, one record at a time (the reference for the look-ahead loop).
fn reference(chunks: &[(u32, Vec<Record>)]) -> Vec<(u32, Record, Option<Record>)> {
    let mut out = Vec::new();
    let mut pending: BTreeMap<u32, Record> = BTreeMap::new();
    for (thread, recs) in chunks {
        let mut prev = pending.remove(thread);
        for r in recs {
            if r.kind == Kind::Ext as u8 {
                if let Some(p) = prev.take() {
                    out.push((*thread, p, Some(*r)));
                }
            } else if let Some(p) = prev.replace(*r) {
                out.push((*thread, p, None));
            }
        }
        if let Some(p) = prev {
            pending.insert(*thread, p);
        }
    }
    for (thread, p) in pending {
        out.push((thread, p, None));
    }
    out
}

#[test]
fn lookahead_pairing_matches_one_at_a_time_across_chunks() {
    use crate::record::RangeCat;
    use Kind::*;
    let op = RangeCat::Op as u8;
    let step = RangeCat::Step as u8;
    // Ext records split from their record by a chunk boundary (also with another thread's
    // chunk in between), orphan and doubled Ext records, empty chunks, records without an
    // Ext, and a record left pending at the very end.
    let chunks: Vec<(u32, Vec<Record>)> = vec![
        (0, vec![rec(1, Ext, 0, 0), rec(2, Kernel, 0, 1)]),
        (0, vec![rec(3, Ext, 0, 0), rec(4, Range, op, 2)]),
        (1, vec![rec(5, Memory, 0, 0)]),
        (0, vec![]),
        (
            1,
            vec![rec(6, Ext, 0, 0), rec(7, Ext, 0, 0), rec(8, Comm, 0, 3)],
        ),
        (
            0,
            vec![
                rec(9, Ext, 0, 0),
                rec(10, Range, step, 4),
                rec(11, Instant, 0, 0),
            ],
        ),
        (
            0,
            vec![
                rec(12, Counter, 0, 0),
                rec(13, Range, op, 2),
                rec(14, Ext, 0, 0),
            ],
        ),
        (1, vec![rec(15, Ext, 0, 0), rec(16, Kernel, 1, 1)]),
        (2, vec![rec(17, Range, op, 2)]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank_0.rlraw");
    let mut w = RawWriter::create(&path).unwrap();
    w.write_meta(&serde_json::json!({"tool": "npu", "level": "level1", "rank": 0}))
        .unwrap();
    w.write_strings([
        (1, "k"),
        (2, "op"),
        (3, "all_reduce"),
        (4, "ProfilerStep#3"),
    ])
    .unwrap();
    for (t, recs) in &chunks {
        w.write_records(*t, recs).unwrap();
    }
    drop(w);
    let data = std::fs::read(&path).unwrap();
    let idx = RawIndex::scan(&data, &path, |_| {}, |_| {}).unwrap();
    let mut got = Vec::new();
    idx.replay(&data, |_| {}, |e, x| got.push((*e, x))).unwrap();
    let want: Vec<(Event, bool)> = reference(&chunks)
        .into_iter()
        .filter_map(|(t, r, x)| {
            Event::decode(t, &r, x.as_ref(), &idx.mapper).map(|e| (e, x.is_some()))
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 10);
    assert!(idx.warnings.is_empty(), "{:?}", idx.warnings);
    assert!(idx.record_warnings().is_empty());
}

#[test]
fn the_window_holds_a_clean_collection_and_excludes_absurd_ticks() {
    let cal = |ticks, mono_ns| Calibration {
        ticks,
        mono_ns,
        wall_ns: mono_ns,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank_0.rlraw");
    let mut w = RawWriter::create(&path).unwrap();
    w.write_meta(&CollectionMeta::default()).unwrap();
    w.write_calibration(cal(1_000_000_000, 5_000_000_000))
        .unwrap();
    w.write_calibration(cal(3_000_000_000, 6_000_000_000))
        .unwrap();
    drop(w);
    let data = std::fs::read(&path).unwrap();
    let idx = RawIndex::scan(&data, &path, |_| {}, |_| {}).unwrap();
    // 0.5 ns per tick: one second of slack is two billion ticks.
    assert_eq!(
        idx.window,
        ClockWindow {
            lo: 0,
            hi: 5_000_000_000
        }
    );
    assert!(idx.window.contains(0) && !idx.window.contains(5_000_000_001));
    assert!(!idx.window.contains(u64::MAX));
}
