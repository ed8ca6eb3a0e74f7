//! Loads one rlprof raw file (`{collection}/rlprof_raw/rank_{rank}.rlraw`) into a [`Profile`],
//! streaming it chunk by chunk with the profiler's [`RawReader`].
//!
//! Ticks are mapped to nanoseconds by a linear fit between the first and last calibration
//! chunks (as `clock::TickMapper` does); with a single calibration point the rate recorded in the
//! metadata (`ns_per_tick`) is used. Times are made relative to the first calibration point and
//! the profile's origin is that point's wall-clock time, so ranks line up on one axis.

use crate::error::ReportError;
use crate::model::{Detail, Event, MemEvent, Profile, SourceFormat, Track, NONE};
use rlprof_profiler::clock::Calibration;
use rlprof_profiler::raw::{Chunk, RawReader, TruncReason};
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::collections::HashMap;
use std::path::Path;

/// What the previous record of a thread was (Ext records extend it).
#[derive(Clone, Copy)]
enum Last {
    Event(usize),
    Mem(usize),
    Other,
}

/// String ids of an op's Ext record, resolved once all strings are read.
struct PendingOpExt {
    detail: u32,
    module: u32,
    shapes: u32,
    dtypes: u32,
    stack: u32,
}

#[derive(Default)]
struct State {
    strings: HashMap<u32, String>,
    calibrations: Vec<Calibration>,
    last: HashMap<u32, Last>,
    pending_ops: Vec<PendingOpExt>,
    pending_groups: Vec<(u32, u32)>,
    /// Collective waits in ticks, converted once the rate is known.
    pending_waits: Vec<(u32, u64)>,
    ns_per_tick_meta: Option<f64>,
    threads: HashMap<u32, String>,
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
    let mut reader = RawReader::open(path).map_err(|e| ReportError::Raw {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let rank = rank_from_name(path).unwrap_or(0);
    let mut p = Profile::new(
        path.to_path_buf(),
        SourceFormat::RlprofRaw,
        rank,
        group.to_string(),
    );
    let mut st = State::default();
    for chunk in reader.by_ref() {
        apply_chunk(&mut p, &mut st, chunk);
    }
    if let Some(c) = reader.corruption() {
        p.notes.push(format!(
            "{c} (the collection was cut short; everything before that offset is shown)"
        ));
    }
    finish(&mut p, st);
    Ok(p)
}

fn apply_chunk(p: &mut Profile, st: &mut State, chunk: Chunk) {
    match chunk {
        Chunk::Meta(m) => apply_meta(p, st, &m),
        Chunk::Strings(v) => st.strings.extend(v),
        Chunk::Records { thread, records } => {
            for r in records {
                apply_record(p, st, thread, &r);
            }
        }
        Chunk::Calibration(c) => st.calibrations.push(c),
        Chunk::Thread { thread, name } => {
            st.threads.insert(thread, name);
        }
        Chunk::Truncated(t) => p.notes.push(format!(
            "truncated by the {} cap after {} events / {} bytes: later events of this collection were not recorded",
            match t.reason {
                TruncReason::Events => "max_events",
                TruncReason::Bytes => "max_bytes",
            },
            t.events_kept,
            t.bytes_kept
        )),
        Chunk::End { dropped, .. } if dropped > 0 => p
            .notes
            .push(format!("{dropped} events were dropped while recording")),
        Chunk::End { .. } => {}
    }
}

fn apply_meta(p: &mut Profile, st: &mut State, m: &serde_json::Value) {
    if let Some(r) = m.get("rank").and_then(|v| v.as_u64()) {
        p.rank = r as u32;
    }
    if let Some(steps) = m.get("steps").and_then(|v| v.as_array()) {
        p.steps = steps.iter().filter_map(|s| s.as_u64()).collect();
    }
    st.ns_per_tick_meta = m.get("ns_per_tick").and_then(|v| v.as_f64());
}

fn apply_record(p: &mut Profile, st: &mut State, thread: u32, r: &Record) {
    let kind = Kind::from_u8(r.kind);
    let push = |p: &mut Profile, track: Track, depth: u16| {
        p.events.push(Event {
            // Raw ticks for now; converted in `finish`.
            start: r.ts as i64,
            dur: r.a as i64,
            name: r.name,
            detail: NONE,
            thread,
            depth,
            track,
        });
        Last::Event(p.events.len() - 1)
    };
    let last = match kind {
        Some(Kind::Range) => push(p, track_of(r.cat), r.aux),
        Some(Kind::Kernel) => push(p, Track::Kernel, 0),
        Some(Kind::Comm) => push(p, Track::Comm, 0),
        Some(Kind::Memory) => {
            p.memory.push(MemEvent {
                t: r.ts as i64,
                delta: if r.cat == 1 { -1 } else { 1 },
                addr: 0,
                op: r.name,
                total: None,
            });
            Last::Mem(p.memory.len() - 1)
        }
        Some(Kind::Ext) => {
            if let Some(l) = st.last.get(&thread).copied() {
                apply_ext(p, st, l, r);
            }
            Last::Other
        }
        _ => Last::Other,
    };
    st.last.insert(thread, last);
}

fn apply_ext(p: &mut Profile, st: &mut State, last: Last, r: &Record) {
    match last {
        Last::Mem(i) => {
            let m = &mut p.memory[i];
            m.addr = r.ts;
            m.delta = m.delta.signum() * r.a as i64;
        }
        Last::Event(i) => {
            let track = p.events[i].track;
            let mut d = Detail::default();
            let idx = p.details.len() as u32;
            match track {
                Track::Op => st.pending_ops.push(PendingOpExt {
                    detail: idx,
                    module: (r.ts & 0xffff_ffff) as u32,
                    shapes: (r.ts >> 32) as u32,
                    dtypes: (r.a & 0xffff_ffff) as u32,
                    stack: (r.a >> 32) as u32,
                }),
                Track::Kernel => {
                    d.flops = (r.ts != 0).then_some(r.ts);
                    d.bytes = (r.a != 0).then_some(r.a);
                }
                Track::Comm => {
                    d.bytes = Some(r.ts);
                    st.pending_waits.push((idx, r.a));
                    st.pending_groups.push((idx, r.name));
                    d.peer = (r.aux > 0).then(|| r.aux as u32 - 1);
                }
                Track::Iteration => d.args = Some(format!("{{\"iteration\":{}}}", r.ts)),
                _ => return,
            }
            p.details.push(d);
            p.events[i].detail = idx;
        }
        Last::Other => {}
    }
}

/// Linear tick -> ns map.
struct Mapper {
    base_ticks: u64,
    ns_per_tick: f64,
}

impl Mapper {
    fn new(cals: &[Calibration], meta_rate: Option<f64>) -> Mapper {
        let (first, last) = (cals.first().copied(), cals.last().copied());
        let fitted = match (first, last) {
            (Some(a), Some(b)) if b.ticks > a.ticks + 1_000 && b.mono_ns > a.mono_ns => {
                Some((b.mono_ns - a.mono_ns) as f64 / (b.ticks - a.ticks) as f64)
            }
            _ => None,
        };
        Mapper {
            base_ticks: first.map(|c| c.ticks).unwrap_or(0),
            ns_per_tick: fitted.or(meta_rate).unwrap_or(1.0),
        }
    }
    fn rel_ns(&self, ticks: i64) -> i64 {
        ((ticks as i128 - self.base_ticks as i128) as f64 * self.ns_per_tick) as i64
    }
    fn span_ns(&self, ticks: u64) -> i64 {
        (ticks as f64 * self.ns_per_tick) as i64
    }
}

fn finish(p: &mut Profile, st: State) {
    let map = Mapper::new(&st.calibrations, st.ns_per_tick_meta);
    p.origin_ns = st.calibrations.first().map(|c| c.wall_ns).unwrap_or(0);
    if st.calibrations.len() < 2 {
        p.notes.push(
            "only one clock calibration point (the process did not stop the collection cleanly); \
             times use the recorded tick rate"
                .into(),
        );
    }
    let mut names: HashMap<u32, u32> = HashMap::new();
    let mut resolve = |p: &mut Profile, id: u32| -> u32 {
        if let Some(&i) = names.get(&id) {
            return i;
        }
        let i = match st.strings.get(&id) {
            Some(s) => p.intern(s),
            None => p.intern(&format!("<unknown name #{id}>")),
        };
        names.insert(id, i);
        i
    };
    for i in 0..p.events.len() {
        let e = p.events[i];
        let start = map.rel_ns(e.start);
        let end = map.rel_ns(e.dur);
        p.events[i].start = start;
        p.events[i].dur = (end - start).max(0);
        p.events[i].name = resolve(p, e.name);
    }
    for i in 0..p.memory.len() {
        p.memory[i].t = map.rel_ns(p.memory[i].t);
        let op = p.memory[i].op;
        p.memory[i].op = if op == 0 { NONE } else { resolve(p, op) };
    }
    let text = |id: u32| (id != 0).then(|| st.strings.get(&id).cloned()).flatten();
    for o in &st.pending_ops {
        let d = &mut p.details[o.detail as usize];
        d.module = text(o.module);
        d.shapes = text(o.shapes);
        d.dtypes = text(o.dtypes);
        d.stack = text(o.stack);
    }
    for &(i, g) in &st.pending_groups {
        p.details[i as usize].group = text(g);
    }
    for &(i, w) in &st.pending_waits {
        p.details[i as usize].wait_ns = Some(map.span_ns(w) as u64);
    }
    let max_thread = st.threads.keys().copied().max().unwrap_or(0);
    p.threads = (0..=max_thread)
        .map(|t| {
            st.threads
                .get(&t)
                .cloned()
                .unwrap_or_else(|| format!("thread {t}"))
        })
        .collect();
    p.sort();
}

/// `rank_3.rlraw` -> 3.
fn rank_from_name(path: &Path) -> Option<u32> {
    path.file_stem()?
        .to_str()?
        .strip_prefix("rank_")?
        .parse()
        .ok()
}
