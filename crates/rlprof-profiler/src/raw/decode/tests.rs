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
    // The Ext records' fields as module, shapes, dtypes and stack ids of the ops.
    let more: Vec<(u32, String)> = (5..=24).map(|i| (i, format!("s{i}"))).collect();
    w.write_strings(more.iter().map(|(i, s)| (*i, s.as_str())))
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

/// Record warnings as `(kind, first offset, count)`.
type Warnings = Vec<(WarningKind, u64, u64)>;

/// The validation rules one record at a time, as first written (the reference for the checks
/// folded into the decoder's match): warnings `(kind, first offset, count)` and the events.
fn validated_reference(
    idx: &RawIndex,
    paired: &[(u32, Record, u64, Option<Record>)],
) -> (Warnings, Vec<(Event, bool)>) {
    let mut events = Vec::new();
    let (mut inverted, mut outside, mut unknown) = ((0, 0), (0, 0), (0, 0));
    let mut unknown_kind = 0;
    let (mut odd_cat, mut odd_cat_byte) = ((0u64, 0u64), 0u8);
    let (mut unnamed, mut unnamed_id) = ((0u64, 0u64), 0u32);
    let note = |case: &mut (u64, u64), off: u64| {
        if case.1 == 0 {
            case.0 = off;
        }
        case.1 += 1;
    };
    for &(t, r, off, x) in paired {
        let interval = match Kind::from_u8(r.kind) {
            None => {
                if unknown.1 == 0 {
                    unknown_kind = r.kind;
                }
                note(&mut unknown, off);
                continue;
            }
            Some(k) => matches!(k, Kind::Range | Kind::Kernel | Kind::Comm),
        };
        if !idx.window.contains(r.ts) || (interval && r.a > idx.window.hi) {
            note(&mut outside, off);
            continue;
        }
        if interval && r.a < r.ts {
            note(&mut inverted, off);
        }
        if let Some(e) = Event::decode(t, &r, x.as_ref(), &idx.mapper) {
            if let Event::Range(rg) = e
                && !(1..=9).contains(&rg.cat)
            {
                if odd_cat.1 == 0 {
                    odd_cat_byte = rg.cat;
                }
                note(&mut odd_cat, off);
            }
            let ids = match e {
                Event::Range(rg) => vec![rg.name, rg.module, rg.shapes, rg.dtypes, rg.stack],
                Event::Comm(c) => vec![c.name, c.group],
                Event::Kernel(k) => vec![k.name],
                Event::Memory(m) => vec![m.op],
                Event::Instant(_, _, n, _) | Event::Counter(_, _, n, _) => vec![n],
            };
            if let Some(&id) = ids.iter().find(|&&id| id != 0 && idx.string(id).is_none()) {
                if unnamed.1 == 0 {
                    unnamed_id = id;
                }
                note(&mut unnamed, off);
            }
            events.push((e, x.is_some()));
        }
    }
    let warnings = [
        (WarningKind::EndBeforeStart, inverted),
        (WarningKind::OutsideClockWindow, outside),
        (WarningKind::UnknownKind(unknown_kind), unknown),
        (WarningKind::UnknownRangeCategory(odd_cat_byte), odd_cat),
        (WarningKind::UnknownString { id: unnamed_id }, unnamed),
    ]
    .into_iter()
    .filter(|(_, (_, n))| *n > 0)
    .map(|(k, (off, n))| (k, off, n))
    .collect();
    (warnings, events)
}

mod validation_matches_the_rules {
    use super::*;
    use proptest::prelude::*;

    /// Tick values around a window's ends and beyond.
    fn tick(lo: u64, hi: u64) -> impl Strategy<Value = u64> {
        prop_oneof![
            prop::sample::select(vec![
                0,
                lo.saturating_sub(1),
                lo,
                lo + 1,
                lo + (hi - lo) / 2,
                hi - 1,
                hi,
                hi.saturating_add(1),
                u64::MAX,
            ]),
            lo..=hi,
            any::<u64>(),
        ]
    }

    fn record(lo: u64, hi: u64) -> impl Strategy<Value = Record> {
        (
            tick(lo, hi),
            tick(lo, hi),
            prop::sample::select(vec![0u8, 1, 2, 2, 2, 3, 4, 5, 6, 7, 8, 42, 255]),
            0u8..11,
        )
            .prop_map(|(ts, a, kind, cat)| Record {
                ts,
                a,
                name: 1,
                kind,
                cat,
                aux: 3,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Random records (good, outside the window by a tick, inverted, of unknown kinds,
        /// Ext records anywhere) in chunks of two threads, in a window that the fast tick
        /// conversion covers and in one it does not (ticks above 2^62): the same events and
        /// the same warnings, with the same offsets, as the rules one record at a time.
        #[test]
        fn same_events_and_warnings(
            high in any::<bool>(),
            chunks in prop::collection::vec(
                (0u32..2, prop::collection::vec(record(4_000_000_000, 8_000_000_000), 0..12)),
                1..6,
            ),
        ) {
            // Rate 1 ns per tick, calibrations at T0 and T0 + 2 s: the window is
            // T0 - 1 s ..= T0 + 3 s; shifted above 2^62 when `high`.
            let shift = if high { 1u64 << 62 } else { 0 };
            let t0 = 5_000_000_000 + shift;
            let chunks: Vec<(u32, Vec<Record>)> = chunks
                .into_iter()
                .map(|(t, recs)| {
                    let recs = recs
                        .into_iter()
                        .map(|mut r| {
                            let up = |v: u64| if (4_000_000_000..=8_000_000_000).contains(&v) {
                                v + shift
                            } else {
                                v
                            };
                            r.ts = up(r.ts);
                            r.a = up(r.a);
                            r
                        })
                        .collect();
                    (t, recs)
                })
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("rank_0.rlraw");
            let mut w = RawWriter::create(&path).unwrap();
            w.write_meta(&serde_json::json!({"tool": "npu", "level": "level1", "rank": 0,
                "start_wall_ns": 1_700_000_000_000_000_000u64, "start_mono_ns": t0,
                "ns_per_tick": 1.0}))
                .unwrap();
            w.write_strings([(1, "r")]).unwrap();
            let cal = |ticks: u64| Calibration {
                ticks,
                mono_ns: ticks,
                wall_ns: ticks - t0 + 1_700_000_000_000_000_000,
            };
            w.write_calibration(cal(t0)).unwrap();
            // Each record with its byte offset, in file order.
            let mut at: Vec<(u32, Vec<(Record, u64)>)> = Vec::new();
            for (t, recs) in &chunks {
                let first = w.bytes_written() + 16 + 8;
                w.write_records(*t, recs).unwrap();
                at.push((
                    *t,
                    recs.iter()
                        .enumerate()
                        .map(|(i, r)| (*r, first + 24 * i as u64))
                        .collect(),
                ));
            }
            w.write_calibration(cal(t0 + 2_000_000_000)).unwrap();
            w.write_end(0, 0).unwrap();
            drop(w);
            let data = std::fs::read(&path).unwrap();
            let idx = RawIndex::scan(&data, &path, |_| {}, |_| {}).unwrap();
            prop_assert_eq!(idx.window, ClockWindow {
                lo: t0 - 1_000_000_000,
                hi: t0 + 3_000_000_000,
            });
            prop_assert_eq!(idx.mapper.narrow_over(idx.window.lo, idx.window.hi), !high);
            // The pairing of `reference`, with offsets.
            let mut paired = Vec::new();
            let mut pending: BTreeMap<u32, (Record, u64)> = BTreeMap::new();
            for (thread, recs) in &at {
                let mut prev = pending.remove(thread);
                for &(r, off) in recs {
                    if r.kind == Kind::Ext as u8 {
                        if let Some((p, poff)) = prev.take() {
                            paired.push((*thread, p, poff, Some(r)));
                        }
                    } else if let Some((p, poff)) = prev.replace((r, off)) {
                        paired.push((*thread, p, poff, None));
                    }
                }
                if let Some(p) = prev {
                    pending.insert(*thread, p);
                }
            }
            for (thread, (p, off)) in pending {
                paired.push((thread, p, off, None));
            }
            let (want_warnings, want_events) = validated_reference(&idx, &paired);
            let mut got = Vec::new();
            idx.replay(&data, |_| {}, |e, x| got.push((*e, x))).unwrap();
            let got_warnings: Warnings = idx
                .record_warnings()
                .iter()
                .map(|w| (w.kind.clone(), w.offset, w.count))
                .collect();
            prop_assert_eq!(got, want_events);
            prop_assert_eq!(got_warnings, want_warnings);
        }
    }
}
