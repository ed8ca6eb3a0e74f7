//! What one parallel chunk builds: its events with names and threads interned locally, open
//! `B` events, process and thread metadata, memory records and step spans.

use super::MAX_RAW_ARGS;
use super::detail::{detail_from_members, detail_of};
use super::event::{Cache, Members, RawEvent};
use super::time::{id_text, us_to_ns};
use super::tracks::{HOST_DEVICE_TYPE, classify, is_whole_trace};
use crate::json_reader::{self as json, Reader};
use crate::model::{Detail, Event, MemEvent, NONE, RAW_DETAIL, RawSpan, Track};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::borrow::Cow;

/// A `B` event waiting for its `E`: start, name, args, category.
pub(super) type OpenBegin<'a> = (i64, u32, Option<Cow<'a, str>>, Option<Cow<'a, str>>);

/// What a chunk cannot settle alone (needs the events of earlier chunks): `B`/`E` pairs and
/// metadata.
pub(super) enum Special<'a> {
    Begin(u32, OpenBegin<'a>),
    End(u32, i64),
    ProcessName(Cow<'a, str>, String),
    ThreadName(Cow<'a, str>, Cow<'a, str>, String),
}

/// A (pid, tid) as written and its chunk-local thread number.
pub(super) type SeenThread<'a> = (Option<&'a str>, Option<&'a str>, u32);

/// The events of one stretch of the events array, with chunk-local name and thread numbers.
pub(super) struct Chunk<'a> {
    /// Where it started and where it stopped (the next element, or past the array's `]`).
    pub(super) start: usize,
    pub(super) stop: usize,
    /// Whether it reached the end of the array.
    pub(super) end: bool,
    /// Elements read.
    pub(super) count: u64,
    /// The first error, if any (everything before it is kept).
    pub(super) error: Option<json::Error>,
    pub(super) events: Vec<Event>,
    pub(super) details: Vec<Detail>,
    pub(super) names: Vec<Cow<'a, str>>,
    pub(super) name_ix: FxHashMap<Cow<'a, str>, u32>,
    pub(super) threads: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub(super) thread_ix: FxHashMap<(Cow<'a, str>, Cow<'a, str>), u32>,
    /// The last few (pid, tid) texts seen and their numbers (host ops, kernels and memory
    /// events interleave a few threads), the next one to replace.
    pub(super) last_threads: [Option<SeenThread<'a>>; 4],
    pub(super) last_next: usize,
    pub(super) memory: Vec<MemEvent>,
    pub(super) mem_thread: Vec<u32>,
    pub(super) mem_host: Vec<bool>,
    /// Specials with the number of events pushed before each.
    pub(super) specials: Vec<(usize, Special<'a>)>,
    pub(super) steps: Vec<u64>,
    pub(super) members: Members<'a>,
    pub(super) cache: Cache<'a>,
    /// Raw details: the `args` texts, and spans into them (arena 0).
    pub(super) arena: String,
    pub(super) spans: Vec<RawSpan>,
}

/// The vectors a chunk fills and merging copies into the profile (or moves out, leaving the
/// capacity), handed on to a later chunk once merged ([`Chunk::into_buffers`]): each
/// fresh allocation of this size is a fresh mapping from glibc, its pages zeroed by the
/// kernel on first touch, so reusing them saves those page faults (the arena of `args` texts
/// is not among them: the profile keeps it).
#[derive(Default)]
pub(super) struct Buffers {
    events: Vec<Event>,
    details: Vec<Detail>,
    memory: Vec<MemEvent>,
    mem_thread: Vec<u32>,
    mem_host: Vec<bool>,
    spans: Vec<RawSpan>,
}

impl Buffers {
    /// Empties every vector and makes room for about `events` events.
    fn ready(mut self, events: usize) -> Buffers {
        fn room<T>(v: &mut Vec<T>, n: usize) {
            v.clear();
            // The guess is rough (an event per 200 bytes) and chunks differ by a few bytes: a
            // reused vector nearly as large is kept as it is (growing it, even empty, copies
            // its whole old block, and the copy's pages are new).
            if v.capacity() < n - n / 8 {
                v.reserve(n);
            }
        }
        room(&mut self.events, events);
        room(&mut self.details, events / 2);
        room(&mut self.memory, events / 2);
        room(&mut self.mem_thread, events / 2);
        room(&mut self.mem_host, events / 2);
        room(&mut self.spans, events / 2);
        self
    }
}

impl<'a> Chunk<'a> {
    /// Parses elements from `start` until the next element starts at or after `bound`, the
    /// array ends, an error, or more than `cap` elements, into `bufs` (emptied first); the
    /// result owns all it holds.
    pub(super) fn parse(
        text: &'a str,
        start: usize,
        bound: usize,
        open: u32,
        cap: u64,
        bufs: Buffers,
    ) -> Chunk<'static> {
        Chunk::parse_borrowed(text, start, bound, open, cap, bufs).detach()
    }

    /// The chunk's vectors, for a later chunk to fill (what they hold is dropped: a merged
    /// chunk's events are in the profile).
    pub(super) fn into_buffers(self) -> Buffers {
        Buffers {
            events: self.events,
            details: self.details,
            memory: self.memory,
            mem_thread: self.mem_thread,
            mem_host: self.mem_host,
            spans: self.spans,
        }
    }

    /// Copies the few strings merging reads (distinct names, thread ids, metadata labels, a
    /// `B` event's `args`) out of the text and drops the scratch that points into it, so that
    /// the text can be given back (a mapped file's pages) or freed (a gunzipped text) before
    /// the chunks are merged, and merging never reads it (the pages of ~30 names scattered
    /// over a chunk would be most of it).
    fn detach(self) -> Chunk<'static> {
        let own = |s: Cow<'a, str>| -> Cow<'static, str> { Cow::Owned(s.into_owned()) };
        let specials = self
            .specials
            .into_iter()
            .map(|(at, s)| {
                let s = match s {
                    Special::Begin(t, (start, n, args, cat)) => {
                        Special::Begin(t, (start, n, args.map(own), cat.map(own)))
                    }
                    Special::End(t, end) => Special::End(t, end),
                    Special::ProcessName(pid, label) => Special::ProcessName(own(pid), label),
                    Special::ThreadName(pid, tid, label) => {
                        Special::ThreadName(own(pid), own(tid), label)
                    }
                };
                (at, s)
            })
            .collect();
        Chunk {
            start: self.start,
            stop: self.stop,
            end: self.end,
            count: self.count,
            error: self.error,
            events: self.events,
            details: self.details,
            names: self.names.into_iter().map(own).collect(),
            name_ix: FxHashMap::default(),
            threads: self
                .threads
                .into_iter()
                .map(|(pid, tid)| (own(pid), own(tid)))
                .collect(),
            thread_ix: FxHashMap::default(),
            last_threads: [None; 4],
            last_next: 0,
            memory: self.memory,
            mem_thread: self.mem_thread,
            mem_host: self.mem_host,
            specials,
            steps: self.steps,
            members: Vec::new(),
            cache: Cache::default(),
            arena: self.arena,
            spans: self.spans,
        }
    }

    /// [`Chunk::parse`] before [`Chunk::detach`].
    fn parse_borrowed(
        text: &'a str,
        start: usize,
        bound: usize,
        open: u32,
        cap: u64,
        bufs: Buffers,
    ) -> Chunk<'a> {
        let guess = (bound.min(text.len()) - start.min(text.len())) / 200;
        let bufs = bufs.ready(guess);
        let mut c = Chunk {
            start,
            stop: start,
            end: false,
            count: 0,
            error: None,
            events: bufs.events,
            details: bufs.details,
            names: Vec::new(),
            name_ix: FxHashMap::default(),
            threads: Vec::new(),
            thread_ix: FxHashMap::default(),
            last_threads: [None; 4],
            last_next: 0,
            memory: bufs.memory,
            mem_thread: bufs.mem_thread,
            mem_host: bufs.mem_host,
            specials: Vec::new(),
            steps: Vec::new(),
            members: Vec::new(),
            cache: Cache::default(),
            // About a third of a PyTorch trace's text is `args` of `X` events.
            arena: String::with_capacity(guess * 64),
            spans: bufs.spans,
        };
        let mut r = Reader::new(text, start);
        loop {
            match RawEvent::read(&mut r, open, &mut c.members) {
                Ok(ev) => {
                    c.count += 1;
                    if c.count > cap {
                        c.stop = r.pos;
                        return c;
                    }
                    c.push(ev);
                }
                Err(e) => {
                    c.error = Some(e);
                    return c;
                }
            }
            r.ws();
            match r.peek() {
                Some(b',') => {
                    r.pos += 1;
                    r.ws();
                    if r.pos >= bound {
                        c.stop = r.pos;
                        return c;
                    }
                }
                Some(b']') => {
                    r.pos += 1;
                    c.stop = r.pos;
                    c.end = true;
                    return c;
                }
                None => {
                    c.error = Some(r.err("EOF while parsing a list"));
                    return c;
                }
                Some(_) => {
                    c.error = Some(r.err("expected `,` or `]`"));
                    return c;
                }
            }
        }
    }

    pub(super) fn intern(&mut self, s: Cow<'a, str>) -> u32 {
        if let Some(&i) = self.name_ix.get(s.as_ref()) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.clone());
        self.name_ix.insert(s, i);
        i
    }

    pub(super) fn thread(&mut self, pid: Option<&'a str>, tid: Option<&'a str>) -> u32 {
        for &(p, t, i) in self.last_threads.iter().flatten() {
            if p == pid && t == tid {
                return i;
            }
        }
        let key = (id_text(pid), id_text(tid));
        let i = match self.thread_ix.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.threads.len() as u32;
                self.threads.push(key.clone());
                self.thread_ix.insert(key, i);
                i
            }
        };
        self.last_threads[self.last_next] = Some((pid, tid, i));
        self.last_next = (self.last_next + 1) % self.last_threads.len();
        i
    }

    pub(super) fn special(&mut self, s: Special<'a>) {
        self.specials.push((self.events.len(), s));
    }

    /// Takes one event.
    pub(super) fn push(&mut self, ev: RawEvent<'a>) {
        let name = match ev.name_str {
            Some(s) => s.text(),
            None => ev.name.map(json::value_text).unwrap_or_default(),
        };
        let ph = ev.ph.map(|s| s.text());
        match ph.as_deref().unwrap_or("") {
            "X" => {
                let t = self.thread(ev.pid, ev.tid);
                let start = us_to_ns(ev.ts);
                // An end past the last nanosecond an i64 holds is clamped to it.
                let dur = us_to_ns(ev.dur).clamp(0, i64::MAX - start.max(0));
                let cat = ev.cat.map(|c| c.text());
                if is_whole_trace(cat.as_deref()) {
                    return;
                }
                let track = classify(cat.as_deref(), &name);
                if track == Track::Step {
                    self.steps.extend(step_number(&name));
                }
                let detail = match ev.args {
                    Some(a) if is_empty_object(a) => NONE,
                    Some(a) => match push_raw(&mut self.arena, &mut self.spans, 0, a, track) {
                        Some(i) => i,
                        None => {
                            let d = if ev.args_members {
                                detail_from_members(
                                    track,
                                    a.len(),
                                    &mut self.members,
                                    &mut self.cache,
                                )
                            } else {
                                detail_of(track, a, &mut self.members, &mut self.cache)
                            };
                            self.details.push(d);
                            (self.details.len() - 1) as u32
                        }
                    },
                    None => NONE,
                };
                let name = self.intern(name);
                self.events.push(Event {
                    start,
                    dur,
                    name,
                    detail,
                    thread: t,
                    depth: 0,
                    track,
                });
            }
            "B" => {
                let t = self.thread(ev.pid, ev.tid);
                let start = us_to_ns(ev.ts);
                let n = self.intern(name);
                let cat = ev.cat.map(|c| c.text());
                self.special(Special::Begin(
                    t,
                    (start, n, ev.args.map(Cow::Borrowed), cat),
                ));
            }
            "E" => {
                let t = self.thread(ev.pid, ev.tid);
                let end = us_to_ns(ev.ts);
                self.special(Special::End(t, end));
            }
            "i" | "I" if name == "[memory]" => {
                if ev.args.is_none() {
                    return;
                }
                let (mut bytes, mut addr, mut total, mut device) = (None, None, None, None);
                if ev.args_members {
                    // Of repeated keys the last wins, as in a map.
                    for (k, v) in &self.members {
                        match k.as_ref() {
                            "Bytes" => bytes = Some(*v),
                            "Addr" => addr = Some(*v),
                            "Total Allocated" => total = Some(*v),
                            "Device Type" => device = Some(*v),
                            _ => {}
                        }
                    }
                }
                let t = self.thread(ev.pid, ev.tid);
                self.mem_thread.push(t);
                // c10's DeviceType: 0 is the CPU.
                self.mem_host
                    .push(device.and_then(json::value_i64) == Some(HOST_DEVICE_TYPE));
                self.memory.push(MemEvent {
                    t: us_to_ns(ev.ts),
                    delta: bytes.and_then(json::value_i64).unwrap_or(0),
                    addr: addr.and_then(json::value_i64).unwrap_or(0) as u64,
                    op: NONE,
                    total: total.and_then(json::value_i64),
                });
            }
            "M" => {
                if !ev.args_members {
                    return;
                }
                let (mut label_name, mut labels) = (None, None);
                for (k, v) in &self.members {
                    match k.as_ref() {
                        "name" => label_name = Some(*v),
                        "labels" => labels = Some(*v),
                        _ => {}
                    }
                }
                let Some(label) = label_name.or(labels) else {
                    return;
                };
                let label = json::value_text(label).into_owned();
                match name.as_ref() {
                    // `process_labels` (`CPU`/`NPU`) labels a process; it is not its name.
                    "process_name" => self.special(Special::ProcessName(id_text(ev.pid), label)),
                    "thread_name" => {
                        self.special(Special::ThreadName(id_text(ev.pid), id_text(ev.tid), label))
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// Appends the concatenation of `parts` to `out`, each part written by a rayon task straight
/// into `out`'s spare capacity (no serial copy, and the new pages are faulted in on every
/// thread).
pub(super) fn par_append<T, I>(out: &mut Vec<T>, parts: Vec<I>)
where
    T: Send,
    I: ExactSizeIterator<Item = T> + Send,
{
    let n: usize = parts.iter().map(ExactSizeIterator::len).sum();
    out.reserve(n);
    let mut rest = &mut out.spare_capacity_mut()[..n];
    let mut slots = Vec::with_capacity(parts.len());
    for part in &parts {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(part.len());
        slots.push(a);
        rest = b;
    }
    slots.into_par_iter().zip(parts).for_each(|(slots, part)| {
        let mut written = 0;
        for (slot, v) in slots.iter_mut().zip(part) {
            slot.write(v);
            written += 1;
        }
        // A part shorter than its `len()` would leave slots unwritten.
        assert_eq!(
            written,
            slots.len(),
            "an iterator yielded fewer items than its len"
        );
    });
    let len = out.len() + n;
    // SAFETY: the `n` slots after the old length are the disjoint `slots` pieces, and each was
    // written in full (asserted above; a failed assertion panics out of `for_each` before
    // this line, leaving the length as it was). `len` is within the reserved capacity.
    unsafe { out.set_len(len) };
}

/// Whether a (validated) value's text is an empty object: its detail is empty.
pub(super) fn is_empty_object(v: &str) -> bool {
    v.strip_prefix('{').is_some_and(|r| {
        r.trim_start_matches([' ', '\n', '\t', '\r'])
            .starts_with('}')
    })
}

/// Keeps `args` (a validated, non-empty value's text) as a raw detail in `arena` (number
/// `arena_ix`); returns the event's detail reference, or `None` when it is too long to keep
/// as text (or past what a span can address), to be decoded now.
pub(super) fn push_raw(
    arena: &mut String,
    spans: &mut Vec<RawSpan>,
    arena_ix: u32,
    args: &str,
    track: Track,
) -> Option<u32> {
    let off = u32::try_from(arena.len()).ok()?;
    let len = u32::try_from(args.len()).ok()?;
    if args.len() > MAX_RAW_ARGS || off.checked_add(len).is_none() {
        return None;
    }
    let i = u32::try_from(spans.len())
        .ok()
        .filter(|&i| i < RAW_DETAIL)?;
    arena.push_str(args);
    spans.push(RawSpan {
        arena: arena_ix,
        off,
        len,
        track,
    });
    Some(RAW_DETAIL | i)
}

/// `ProfilerStep#12` (or rlprof's `rlprof_step#12`) -> 12.
pub(super) fn step_number(name: &str) -> Option<u64> {
    name.strip_prefix("ProfilerStep#")
        .or_else(|| name.strip_prefix(super::tracks::RL_STEP))
        .and_then(|s| s.parse().ok())
}
