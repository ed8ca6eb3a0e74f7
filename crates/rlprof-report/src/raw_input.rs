//! Loads one rlprof raw file (`{collection}/rlprof_raw/rank_{rank}.rlraw`) into a [`Profile`]
//! through the profiler's decoder, [`RawIndex`]: the same metadata, Ext pairing, clock mapping
//! and validation as `rlprof analyse`, so both show the same durations, and a file `analyse`
//! calls unrecoverable is refused here too (and so never gets an `analyse` recommendation).
//!
//! Times are made relative to the first calibration point and the profile's origin is that
//! point's wall-clock time, so ranks line up on one axis.

use crate::error::ReportError;
use crate::model::{Detail, Event, MemEvent, NONE, Profile, SourceFormat, Track};
use rlprof_profiler::collection::mmap::RawBytes;
use rlprof_profiler::raw::{self as raw, RawIndex, TruncReason};
use rlprof_profiler::record::RangeCat;
use std::collections::HashMap;
use std::path::Path;

/// An event's string ids, resolved once every event is in (names are interned in event order).
#[derive(Default)]
struct State {
    mem_ops: Vec<u32>,
}

fn track_of(cat: u8) -> Track {
    match RangeCat::from_u8(cat) {
        Some(RangeCat::Step) => Track::Step,
        Some(RangeCat::Phase) => Track::Phase,
        Some(RangeCat::RoleCall) => Track::RoleCall,
        Some(RangeCat::Op) => Track::Op,
        Some(RangeCat::Span) => Track::Span,
        Some(RangeCat::Api) => Track::Api,
        Some(RangeCat::Runtime) => Track::Runtime,
        Some(RangeCat::Iteration) => Track::Iteration,
        Some(RangeCat::User) | None => Track::User,
    }
}

/// Loads a raw file. `group` labels the collection (`step1/e2e`).
pub fn load_raw(path: &Path, group: &str) -> Result<Profile, ReportError> {
    let fail = |message: String| ReportError::Raw {
        path: path.to_path_buf(),
        message,
    };
    // Each pass hands the file's pages back behind it (`release_before`), so the mapped file
    // never sits in memory beside the events: the events are most of a report's memory.
    let bytes = RawBytes::open(path).map_err(|e| fail(e.to_string()))?;
    let idx = RawIndex::scan(bytes.bytes(), path, |_| {}, |o| bytes.release_before(o))
        .map_err(|e| fail(e.to_string()))?;
    bytes.restart();
    let mut p = Profile::new(
        path.to_path_buf(),
        SourceFormat::RlprofRaw,
        idx.meta.rank,
        group.to_string(),
    );
    p.steps = idx.meta.steps.clone();
    p.meta.world_size = Some(idx.meta.world_size);
    p.origin_ns = idx.first_calibration.map_or(0, |c| c.wall_ns);
    add_notes(&mut p, &idx);
    // At most one event per record: reserved once, so the buffer never doubles past it (the
    // events of a large collection are most of a report's memory).
    p.events
        .reserve_exact((idx.valid_bytes / rlprof_profiler::record::RECORD_SIZE as u64) as usize);
    let mut st = State::default();
    idx.replay(
        bytes.bytes(),
        |o| bytes.release_before(o),
        |e, has_ext| add_event(&mut p, &mut st, &idx, e, has_ext),
    )
    .map_err(|e| fail(e.to_string()))?;
    p.notes
        .extend(idx.record_warnings().iter().map(|w| w.to_string()));
    finish(&mut p, st, &idx);
    drop((idx, bytes));
    p.sort_by_recorded_depth();
    Ok(p)
}

fn add_notes(p: &mut Profile, idx: &RawIndex) {
    if let Some(t) = &idx.truncated {
        p.notes.push(format!(
            "truncated by the {} cap after {} events / {} bytes: later events of this collection were not recorded",
            match t.reason {
                TruncReason::Events => "max_events",
                TruncReason::Bytes => "max_bytes",
            },
            t.events_kept,
            t.bytes_kept
        ));
    }
    if let Some((_, dropped)) = idx.end.filter(|&(_, d)| d > 0) {
        p.notes
            .push(format!("{dropped} events were dropped while recording"));
    }
    if let Some(c) = &idx.corruption {
        p.notes.push(format!(
            "{c} (the collection was cut short; everything before that offset is shown)"
        ));
    }
    if idx.calibration_points < 2 {
        p.notes.push(
            "only one clock calibration point (the process did not stop the collection cleanly); \
             times use the recorded tick rate"
                .into(),
        );
    }
    p.notes.extend(idx.warnings.iter().map(|w| w.to_string()));
}

/// Nanoseconds from the first calibration point.
fn rel(idx: &RawIndex, wall_ns: u64) -> i64 {
    wall_ns as i64 - idx.origin_wall() as i64
}

fn add_event(p: &mut Profile, st: &mut State, idx: &RawIndex, e: &raw::Event, has_ext: bool) {
    let text = |id: u32| {
        (id != 0)
            .then(|| idx.string(id).map(str::to_string))
            .flatten()
    };
    let (track, name, thread, start, end, depth, detail) = match *e {
        raw::Event::Range(r) => {
            let track = track_of(r.cat);
            let detail = match track {
                _ if !has_ext => None,
                Track::Op => Some(Detail {
                    module: text(r.module),
                    shapes: text(r.shapes),
                    dtypes: text(r.dtypes),
                    stack: text(r.stack),
                    ..Detail::default()
                }),
                Track::Iteration => Some(Detail {
                    args: r.iter_id.map(|i| format!("{{\"iteration\":{i}}}")),
                    ..Detail::default()
                }),
                _ => None,
            };
            (track, r.name, r.thread, r.start, r.end, r.depth, detail)
        }
        raw::Event::Kernel(k) => {
            let detail = has_ext.then(|| Detail {
                flops: (k.flops != 0).then_some(k.flops),
                bytes: (k.bytes != 0).then_some(k.bytes),
                ..Detail::default()
            });
            (Track::Kernel, k.name, k.thread, k.start, k.end, 0, detail)
        }
        raw::Event::Comm(c) => {
            let detail = has_ext.then(|| Detail {
                bytes: Some(c.bytes),
                wait_ns: Some(c.wait_ns),
                group: text(c.group),
                peer: c.peer.map(u32::from),
                ..Detail::default()
            });
            (Track::Comm, c.name, c.thread, c.start, c.end, 0, detail)
        }
        raw::Event::Memory(m) => {
            let sign = if m.free { -1 } else { 1 };
            p.memory.push(MemEvent {
                t: rel(idx, m.ts),
                delta: if has_ext { sign * m.bytes as i64 } else { sign },
                addr: m.addr,
                op: NONE,
                total: None,
            });
            st.mem_ops.push(m.op);
            return;
        }
        raw::Event::Instant(..) | raw::Event::Counter(..) => return,
    };
    let detail = detail.map_or(NONE, |d| {
        p.details.push(d);
        (p.details.len() - 1) as u32
    });
    let start = rel(idx, start);
    p.events.push(Event {
        start,
        dur: (rel(idx, end) - start).max(0),
        // The file's name id for now; interned in `finish`.
        name,
        detail,
        thread,
        depth,
        track,
    });
}

fn finish(p: &mut Profile, st: State, idx: &RawIndex) {
    let mut names: HashMap<u32, u32> = HashMap::new();
    let mut resolve = |p: &mut Profile, id: u32| -> u32 {
        if let Some(&i) = names.get(&id) {
            return i;
        }
        let i = match idx.string(id) {
            Some(s) => p.intern(s),
            None => p.intern(&format!("<unknown name #{id}>")),
        };
        names.insert(id, i);
        i
    };
    for i in 0..p.events.len() {
        let id = p.events[i].name;
        p.events[i].name = resolve(p, id);
    }
    for (i, op) in st.mem_ops.into_iter().enumerate() {
        p.memory[i].op = if op == 0 { NONE } else { resolve(p, op) };
    }
    let max_thread = idx.threads.keys().copied().max().unwrap_or(0);
    p.threads = (0..=max_thread)
        .map(|t| {
            idx.threads
                .get(&t)
                .cloned()
                .unwrap_or_else(|| format!("thread {t}"))
        })
        .collect();
}
