//! Merging the chunks in file order into one [`Profile`](crate::model::Profile) (global string
//! and thread numbering as the sequential parse gives), then what is known only at the end:
//! process names, host memory, and each memory event's owning op.

use super::chunk::{Chunk, OpenBegin, Special, is_empty_object, par_append, push_raw, step_number};
use super::detail::detail_of_text;
use super::tracks::{classify, is_whole_trace};
use crate::model::{Event, MemEvent, NONE, Profile, RAW_DETAIL, RawDetails, RawSpan, Track};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// Merges chunks in order and applies what is known only at the end.
#[derive(Default)]
pub(super) struct State {
    pub(super) events: u64,
    pub(super) threads: HashMap<(String, String), u32>,
    pub(super) thread_pid: Vec<String>,
    pub(super) process_names: HashMap<String, String>,
    pub(super) thread_names: HashMap<(String, String), String>,
    pub(super) open: HashMap<u32, Vec<OpenBegin<'static>>>,
    pub(super) mem_thread: Vec<u32>,
    /// Per memory event: whether it is host (CPU) memory.
    pub(super) mem_host: Vec<bool>,
    pub(super) steps: Vec<u64>,
    pub(super) base_ns: Option<u64>,
    pub(super) dist_rank: Option<u32>,
    /// Job metadata from the top level (world size, trace id, host).
    pub(super) meta: crate::model::JobMeta,
    /// The arena (in `p.raw_details`) of matched `B`/`E` events' raw details, once there is one.
    pub(super) pair_arena: Option<u32>,
}

impl State {
    pub(super) fn thread(&mut self, pid: &str, tid: &str) -> u32 {
        let key = (pid.to_string(), tid.to_string());
        if let Some(&t) = self.threads.get(&key) {
            return t;
        }
        let t = self.thread_pid.len() as u32;
        self.thread_pid.push(key.0.clone());
        self.threads.insert(key, t);
        t
    }

    /// Appends a chunk's events to `p` (numbering its names, threads and details globally);
    /// the chunk keeps its emptied vectors ([`Chunk::into_buffers`]).
    pub(super) fn merge(&mut self, c: &mut Chunk<'static>, p: &mut Profile) {
        let tmap: Vec<u32> = c.threads.iter().map(|(a, b)| self.thread(a, b)).collect();
        let nmap: Vec<u32> = c.names.iter().map(|n| p.intern(n)).collect();
        let dbase = p.details.len() as u32;
        p.details.append(&mut c.details);
        let raw = &mut p.raw_details;
        let sbase = raw.spans.len() as u32;
        // Past what a reference can address: decoded now (not reached under the event limit).
        let fits = (sbase as usize + c.spans.len()) < RAW_DETAIL as usize;
        if !c.spans.is_empty() && fits {
            let a = raw.arenas.len() as u32;
            raw.arenas.push(std::mem::take(&mut c.arena));
            raw.spans
                .extend(c.spans.iter().map(|s| RawSpan { arena: a, ..*s }));
        }
        let detail = |d: u32, p: &mut Profile| {
            if d == NONE {
                NONE
            } else if d & RAW_DETAIL == 0 {
                d + dbase
            } else if fits {
                d + sbase
            } else {
                let s = c.spans[(d & !RAW_DETAIL) as usize];
                let text = &c.arena[s.off as usize..(s.off + s.len) as usize];
                p.add_detail(detail_of_text(s.track, text))
            }
        };
        let remap = |e: &Event, p: &mut Profile| Event {
            name: nmap[e.name as usize],
            thread: tmap[e.thread as usize],
            detail: detail(e.detail, p),
            ..*e
        };
        let mut done = 0;
        for (at, s) in std::mem::take(&mut c.specials) {
            for e in &c.events[done..at] {
                let e = remap(e, p);
                p.events.push(e);
            }
            done = at;
            match s {
                Special::Begin(t, (start, n, args, cat)) => {
                    self.open.entry(tmap[t as usize]).or_default().push((
                        start,
                        nmap[n as usize],
                        args,
                        cat,
                    ));
                }
                Special::End(t, end) => {
                    let t = tmap[t as usize];
                    if let Some((start, n, args, cat)) = self.open.get_mut(&t).and_then(|v| v.pop())
                    {
                        let dur = end.saturating_sub(start).max(0);
                        self.end_event(p, t, n, cat.as_deref(), start, dur, args.as_deref());
                    }
                }
                Special::ProcessName(pid, label) => {
                    self.process_names.insert(pid.into_owned(), label);
                }
                Special::ThreadName(pid, tid, label) => {
                    self.thread_names
                        .insert((pid.into_owned(), tid.into_owned()), label);
                }
            }
        }
        for e in &c.events[done..] {
            let e = remap(e, p);
            p.events.push(e);
        }
        p.memory.extend_from_slice(&c.memory);
        self.mem_thread
            .extend(c.mem_thread.iter().map(|&t| tmap[t as usize]));
        self.mem_host.extend_from_slice(&c.mem_host);
        self.steps.append(&mut c.steps);
    }

    /// [`State::merge`] of all chunks at once, for chunks without `B`/`E` events and with raw
    /// details that fit a reference: the numbering is done in order, the copying (events,
    /// memory events, raw detail spans) in parallel into the sized vectors.
    pub(super) fn merge_parallel(&mut self, chunks: &mut [Chunk<'static>], p: &mut Profile) {
        struct Map {
            names: Vec<u32>,
            threads: Vec<u32>,
            details: u32,
            spans: u32,
            arena: u32,
        }
        let mut maps = Vec::with_capacity(chunks.len());
        // Where each chunk's events, memory events and spans start in the new ones.
        let (mut ev_at, mut mem_at, mut span_at) = (vec![0], vec![0], vec![0]);
        let span_base = p.raw_details.spans.len();
        for c in chunks.iter_mut() {
            let threads: Vec<u32> = c.threads.iter().map(|(a, b)| self.thread(a, b)).collect();
            let names: Vec<u32> = c.names.iter().map(|n| p.intern(n)).collect();
            let details = p.details.len() as u32;
            p.details.append(&mut c.details);
            let arena = p.raw_details.arenas.len() as u32;
            if !c.spans.is_empty() {
                p.raw_details.arenas.push(std::mem::take(&mut c.arena));
            }
            for (_, s) in std::mem::take(&mut c.specials) {
                match s {
                    Special::ProcessName(pid, label) => {
                        self.process_names.insert(pid.into_owned(), label);
                    }
                    Special::ThreadName(pid, tid, label) => {
                        self.thread_names
                            .insert((pid.into_owned(), tid.into_owned()), label);
                    }
                    Special::Begin(..) | Special::End(..) => unreachable!("merged one by one"),
                }
            }
            self.steps.append(&mut c.steps);
            maps.push(Map {
                names,
                threads,
                details,
                spans: (span_base + span_at.last().expect("non-empty")) as u32,
                arena,
            });
            ev_at.push(ev_at.last().expect("non-empty") + c.events.len());
            mem_at.push(mem_at.last().expect("non-empty") + c.memory.len());
            span_at.push(span_at.last().expect("non-empty") + c.spans.len());
        }
        let chunks = &*chunks;
        let maps = &maps;
        par_append(
            &mut p.events,
            (0..chunks.len())
                .map(|k| {
                    let m = &maps[k];
                    chunks[k].events.iter().map(move |e| Event {
                        name: m.names[e.name as usize],
                        thread: m.threads[e.thread as usize],
                        detail: if e.detail == NONE {
                            NONE
                        } else if e.detail & RAW_DETAIL == 0 {
                            e.detail + m.details
                        } else {
                            e.detail + m.spans
                        },
                        ..*e
                    })
                })
                .collect(),
        );
        par_append(
            &mut p.raw_details.spans,
            (0..chunks.len())
                .map(|k| {
                    let arena = maps[k].arena;
                    chunks[k].spans.iter().map(move |s| RawSpan { arena, ..*s })
                })
                .collect(),
        );
        par_append(
            &mut p.memory,
            chunks.iter().map(|c| c.memory.iter().copied()).collect(),
        );
        par_append(
            &mut self.mem_host,
            chunks.iter().map(|c| c.mem_host.iter().copied()).collect(),
        );
        par_append(
            &mut self.mem_thread,
            (0..chunks.len())
                .map(|k| {
                    let m = &maps[k];
                    chunks[k]
                        .mem_thread
                        .iter()
                        .map(move |&t| m.threads[t as usize])
                })
                .collect(),
        );
    }

    /// The event of a matched `B`/`E` pair.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn end_event(
        &mut self,
        p: &mut Profile,
        thread: u32,
        name: u32,
        cat: Option<&str>,
        start: i64,
        dur: i64,
        args: Option<&str>,
    ) {
        if is_whole_trace(cat) {
            return;
        }
        let track = classify(cat, p.str(name));
        if track == Track::Step {
            self.steps.extend(step_number(p.str(name)));
        }
        let detail = match args {
            Some(a) if is_empty_object(a) => NONE,
            Some(a) => {
                let raw = &mut p.raw_details;
                let ix = *self.pair_arena.get_or_insert_with(|| {
                    raw.arenas.push(String::new());
                    (raw.arenas.len() - 1) as u32
                });
                let RawDetails { arenas, spans, .. } = raw;
                match push_raw(&mut arenas[ix as usize], spans, ix, a, track) {
                    Some(i) => i,
                    None => p.add_detail(detail_of_text(track, a)),
                }
            }
            None => NONE,
        };
        p.events.push(Event {
            start,
            dur,
            name,
            detail,
            thread,
            depth: 0,
            track,
        });
    }

    /// Merges one wave of an events array's chunks (in file order) into `p`. The vectors are
    /// sized for the rest of the array from this wave (`scale`: the text from the wave's start
    /// to the end over the wave's text, plus an eighth), so that they are not grown wave by
    /// wave (each growth a copy, its pages faulted again).
    pub(super) fn merge_wave(
        &mut self,
        chunks: &mut [Chunk<'static>],
        scale: f64,
        p: &mut Profile,
    ) {
        let room = |f: fn(&Chunk) -> usize| {
            let n = chunks.iter().map(f).sum::<usize>();
            (n as f64 * scale * 1.125) as usize
        };
        p.events
            .reserve(room(|c| c.events.len() + c.specials.len()));
        p.details
            .reserve(room(|c| c.details.len() + c.specials.len()));
        p.memory.reserve(room(|c| c.memory.len()));
        self.mem_thread.reserve(room(|c| c.memory.len()));
        self.mem_host.reserve(room(|c| c.memory.len()));
        p.raw_details.spans.reserve(room(|c| c.spans.len()));
        // `B`/`E` pairs are matched in file order across chunks, so chunks with them are
        // merged one by one; otherwise the copying is done in parallel. (Both number names,
        // threads and details alike, so which one a wave takes does not change the profile.)
        let pairs = chunks.iter().any(|c| {
            c.specials
                .iter()
                .any(|(_, s)| matches!(s, Special::Begin(..) | Special::End(..)))
        });
        let spans = p.raw_details.spans.len() + chunks.iter().map(|c| c.spans.len()).sum::<usize>();
        if pairs || spans >= RAW_DETAIL as usize {
            for c in chunks {
                self.merge(c, p);
            }
        } else {
            self.merge_parallel(chunks, p);
        }
    }

    /// Applies what is known only once every event is merged: process names (Ascend's device
    /// processes), thread names, memory attribution, the rank and the time base.
    pub(super) fn finish(self, p: &mut Profile) {
        p.raw_details.decode = Some(detail_of_text);
        super::tracks::demote_nested_role_calls(&mut p.events);
        let State {
            threads,
            thread_pid,
            process_names,
            thread_names,
            mem_thread,
            mem_host,
            steps,
            base_ns,
            dist_rank,
            meta,
            ..
        } = self;
        let proc_of: Vec<&str> = thread_pid
            .iter()
            .map(|pid| process_names.get(pid).map(String::as_str).unwrap_or(""))
            .collect();
        let mut tid_of = vec![""; thread_pid.len()];
        for ((pid, tid), t) in &threads {
            tid_of[*t as usize] = thread_names
                .get(&(pid.clone(), tid.clone()))
                .map(String::as_str)
                .unwrap_or("");
        }
        crate::processes::apply(
            &mut p.events,
            &p.strings,
            |t| proc_of.get(t as usize).copied().unwrap_or(""),
            |t| tid_of.get(t as usize).copied().unwrap_or(""),
        );
        if let Some(pid) = p
            .events
            .iter()
            .find(|e| matches!(e.track, Track::Op | Track::Step))
            .and_then(|e| thread_pid.get(e.thread as usize))
        {
            p.meta.pid = Some(pid.clone());
        }
        let mut names = vec![String::new(); thread_pid.len()];
        for ((pid, tid), t) in &threads {
            let proc_name = process_names
                .get(pid)
                .cloned()
                .unwrap_or_else(|| format!("pid {pid}"));
            let th = thread_names
                .get(&(pid.clone(), tid.clone()))
                .cloned()
                .unwrap_or_else(|| format!("tid {tid}"));
            names[*t as usize] = format!("{proc_name} / {th}");
        }
        p.threads = names;
        p.origin_ns = base_ns.unwrap_or(0);
        if let Some(r) = dist_rank {
            p.rank = r;
        }
        p.steps.extend(steps);
        p.steps.sort_unstable();
        p.steps.dedup();
        rl_steps(p);
        attribute_memory(p, &mem_thread);
        split_host_memory(p, &mem_host);
        let m = &mut p.meta;
        m.world_size = meta.world_size.or(m.world_size);
        m.trace_id = meta.trace_id.or(m.trace_id.take());
        m.host = meta.host.or(m.host.take());
        p.sort();
    }
}

/// Moves the memory events marked as host (CPU) memory into [`Profile::host_memory`].
pub(crate) fn split_host_memory(p: &mut Profile, host: &[bool]) {
    let n = host.iter().filter(|&&h| h).count();
    if n == 0 {
        return;
    }
    // In place, the host ones copied into a vector sized once (not two vectors grown push by
    // push, each growth a copy with its pages faulted again: ~5% of a load's page faults).
    p.host_memory.reserve(n);
    let mut is_host = host.iter().chain(std::iter::repeat(&false));
    p.memory.retain(|m| {
        let h = *is_host.next().expect("endless");
        if h {
            p.host_memory.push(*m);
        }
        !h
    });
}

/// Sets each memory event's op to the innermost host op open on its thread at that time
/// (the lookups run in parallel).
pub(super) fn attribute_memory(p: &mut Profile, mem_thread: &[u32]) {
    // Each thread's vector sized once (counted first) rather than grown push by push.
    let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
    for e in p.events.iter().filter(|e| e.track == Track::Op) {
        *counts.entry(e.thread).or_default() += 1;
    }
    let mut ops: FxHashMap<u32, Vec<(i64, i64, u32)>> = counts
        .into_iter()
        .map(|(t, n)| (t, Vec::with_capacity(n)))
        .collect();
    for e in p.events.iter().filter(|e| e.track == Track::Op) {
        ops.entry(e.thread)
            .or_default()
            .push((e.start, e.end(), e.name));
    }
    ops.par_iter_mut().for_each(|(_, v)| v.sort_unstable());
    // In pieces: memory events come in time order, so within a piece the next event's
    // partition point is usually a few ops past the previous one (walked to, not searched).
    p.memory
        .par_chunks_mut(4096)
        .zip(mem_thread.par_chunks(4096))
        .for_each(|(ms, ts)| {
            let mut last: Option<(u32, i64, usize)> = None;
            for (m, &t) in ms.iter_mut().zip(ts) {
                let Some(v) = ops.get(&t) else { continue };
                let i = match last {
                    Some((lt, lm, li)) if lt == t && lm <= m.t => {
                        // `partition_point` of everything up to `lm`, so the answer is at
                        // or after `li`.
                        let mut i = li;
                        let mut steps = 0;
                        while i < v.len() && v[i].0 <= m.t {
                            i += 1;
                            steps += 1;
                            if steps == 16 {
                                i += v[i..].partition_point(|o| o.0 <= m.t);
                                break;
                            }
                        }
                        i
                    }
                    _ => v.partition_point(|o| o.0 <= m.t),
                };
                last = Some((t, m.t, i));
                attribute_one(m, &v[..i]);
            }
        });
}

/// Sets `m.op` to the innermost of `before` (ops starting at or before it, sorted) still open
/// at its time.
#[inline]
pub(super) fn attribute_one(m: &mut MemEvent, before: &[(i64, i64, u32)]) {
    m.op = before
        .iter()
        .rev()
        .take(256)
        .find(|o| o.1 >= m.t)
        .map(|o| o.2)
        .unwrap_or(NONE);
}

/// rlprof's torch traces mark the RL step `rlprof_step#N` and, as verl's torch profiler does,
/// each update mini-batch `ProfilerStep#k`: in a trace with `rlprof_step#N` rows the RL steps
/// are the steps (named `ProfilerStep#N`, as every other reader names a step) and the
/// mini-batch rows user ranges. Any other trace is left as it is.
pub(crate) fn rl_steps(p: &mut Profile) {
    let rl = |p: &Profile, e: &crate::model::Event| {
        e.track == Track::Step && p.str(e.name).starts_with(super::tracks::RL_STEP)
    };
    if !p.events.iter().any(|e| rl(p, e)) {
        return;
    }
    let mut steps = Vec::new();
    for i in 0..p.events.len() {
        if p.events[i].track != Track::Step {
            continue;
        }
        let name = p.str(p.events[i].name).to_string();
        match name.strip_prefix(super::tracks::RL_STEP) {
            Some(n) => {
                p.events[i].name = p.intern(&format!("ProfilerStep#{n}"));
                steps.extend(n.parse::<u64>().ok());
            }
            None => p.events[i].track = Track::User,
        }
    }
    steps.sort_unstable();
    steps.dedup();
    p.steps = steps;
}
