//! The loaded data: one [`Profile`] per (collection, rank) or per foreign trace file, holding
//! timeline events on named tracks, memory events and side tables. Every input format is
//! converted into this model; all summaries ([`crate::summary`]) and views are computed from it.

use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

/// Index meaning "no value" in string and detail references.
pub const NONE: u32 = u32::MAX;

/// Set in [`Event::detail`] (other than [`NONE`]) when the detail is kept as source text
/// ([`RawDetails`]); the other bits are the index into [`RawDetails`]'s spans.
pub const RAW_DETAIL: u32 = 1 << 31;

/// Which timeline track an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Track {
    /// A training step (`ProfilerStep#N`).
    Step,
    /// A trainer phase (`gen`, `reward`, ...).
    Phase,
    /// A role call (`generate_sequences`, ...).
    RoleCall,
    /// A recorded inner iteration (`decode_step`, `micro_batch`, ...).
    Iteration,
    /// A host framework op.
    Op,
    /// Engine API layer (dispatch, launch; `cuda_runtime` in PyTorch traces).
    Api,
    /// Runtime layer (allocator, synchronisation).
    Runtime,
    /// A user range or annotation.
    User,
    /// A `tracing` span or a Python function.
    Span,
    /// A device compute kernel.
    Kernel,
    /// A device copy or set (memcpy/memset, DMA).
    Memcpy,
    /// A communication op.
    Comm,
}

impl Track {
    /// Every track, in display order.
    pub const ALL: [Track; 12] = [
        Track::Step,
        Track::Phase,
        Track::RoleCall,
        Track::Iteration,
        Track::User,
        Track::Span,
        Track::Op,
        Track::Api,
        Track::Runtime,
        Track::Kernel,
        Track::Memcpy,
        Track::Comm,
    ];

    /// Short lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Track::Step => "step",
            Track::Phase => "phase",
            Track::RoleCall => "role_call",
            Track::Iteration => "iteration",
            Track::Op => "op",
            Track::Api => "api",
            Track::Runtime => "runtime",
            Track::User => "user",
            Track::Span => "span",
            Track::Kernel => "kernel",
            Track::Memcpy => "memcpy",
            Track::Comm => "comm",
        }
    }

    /// Whether the track frames the timeline (few events, always shown in full).
    pub fn is_structural(self) -> bool {
        matches!(
            self,
            Track::Step | Track::Phase | Track::RoleCall | Track::Iteration
        )
    }

    /// Whether the track holds device activity (kernels, copies, collectives).
    pub fn is_device(self) -> bool {
        matches!(self, Track::Kernel | Track::Memcpy | Track::Comm)
    }

    /// Whether events of this track appear in the top-ops table.
    pub fn is_content(self) -> bool {
        !self.is_structural()
    }
}

/// One timeline event: an interval on a track. Times are nanoseconds relative to the
/// profile's [`Profile::origin_ns`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// Start (ns from the profile origin).
    pub start: i64,
    /// Duration (ns, >= 0).
    pub dur: i64,
    /// Name (index into [`Profile::strings`]).
    pub name: u32,
    /// Detail (index into [`Profile::details`], or [`RAW_DETAIL`] plus an index into the raw
    /// details) or [`NONE`]; read it with [`Profile::detail`].
    pub detail: u32,
    /// Thread or stream the event ran on (per-profile numbering).
    pub thread: u32,
    /// Nesting depth as recorded (0 when unknown).
    pub depth: u16,
    /// The track.
    pub track: Track,
}

/// A placeholder event (filling a buffer before it is overwritten).
const EMPTY: Event = Event {
    start: 0,
    dur: 0,
    name: NONE,
    detail: NONE,
    thread: 0,
    depth: 0,
    track: Track::Step,
};

impl Event {
    /// End time (saturating: a reader clamps `dur` so that it fits, this only guards).
    pub fn end(&self) -> i64 {
        self.start.saturating_add(self.dur)
    }
}

/// Extra fields of an event; every field may be absent (an absent value is unknown, not 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Detail {
    /// Module hierarchy (`model.layers.0.mlp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Input shapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shapes: Option<String>,
    /// Input dtypes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtypes: Option<String>,
    /// Call stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// Bytes moved (kernels) or transferred (collectives: the input buffer, PyTorch's
    /// `In msg nelems` x dtype size; rlprof's own collections record the output buffer of an
    /// all-gather, the input of every other collective).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// A collective's output buffer (`Out msg nelems` x dtype size), when the producer says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_bytes: Option<u64>,
    /// Ranks in the collective's group (`Group size`), when the producer says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_size: Option<u32>,
    /// FLOPs (kernels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops: Option<u64>,
    /// Time spent waiting for peers (collectives, ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
    /// Communication group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Peer rank (point-to-point).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<u32>,
    /// Other arguments of a foreign event, as compact JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
}

/// Details kept as the JSON text of a foreign event's `args` (copied out of the input into a few
/// large buffers, one per parse chunk) and decoded only when shown: building a [`Detail`] costs
/// several allocations and most events' details are never shown (`--format json` shows none).
#[derive(Debug, Clone, Default)]
pub struct RawDetails {
    /// Buffers of concatenated `args` texts.
    pub(crate) arenas: Vec<String>,
    /// One per raw detail.
    pub(crate) spans: Vec<RawSpan>,
    /// Decodes a detail's text (set by the loader that kept the texts, the Chrome-trace
    /// reader; the model does not know the format).
    pub(crate) decode: Option<fn(Track, &str) -> Detail>,
}

/// Where one raw detail's text is, and the track its event had when read (which decides what
/// is decoded; Ascend traces re-assign some tracks later).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawSpan {
    pub arena: u32,
    pub off: u32,
    pub len: u32,
    pub track: Track,
}

impl RawDetails {
    /// The text of span `i`.
    fn text(&self, i: usize) -> Option<(&str, Track)> {
        let s = self.spans.get(i)?;
        let a = self.arenas.get(s.arena as usize)?;
        Some((a.get(s.off as usize..(s.off + s.len) as usize)?, s.track))
    }
}

/// One allocation or free.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemEvent {
    /// Time (ns from the profile origin).
    pub t: i64,
    /// Signed size: positive for an allocation, negative for a free.
    pub delta: i64,
    /// Address.
    pub addr: u64,
    /// The op it is attributed to (string index) or [`NONE`].
    pub op: u32,
    /// Total allocated bytes after the event as reported by the producer, when it reports it.
    pub total: Option<i64>,
}

/// One allocation by an op (`OP_MEMORY` / `operator_memory.csv` row) and its release, if any:
/// times (ns, relative to the profile's origin) and the allocator's totals just after each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpAllocation {
    /// The op (interned name, or [`NONE`]).
    pub op: u32,
    /// Bytes.
    pub size: i64,
    /// Allocation time.
    pub at: i64,
    /// Total allocated just after the allocation.
    pub total_at: Option<i64>,
    /// Release time and total allocated just after it.
    pub release: Option<(i64, Option<i64>)>,
}

/// Where a profile came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceFormat {
    /// An rlprof raw file.
    RlprofRaw,
    /// A PyTorch profiler Chrome trace.
    TorchTrace,
    /// An Ascend profiler output directory.
    Ascend,
}

/// A foreign table shown as is (e.g. Ascend's `step_trace_time.csv`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Table {
    /// Title (the file name).
    pub title: String,
    /// Column names.
    pub columns: Vec<String>,
    /// Rows of cells (text as found).
    pub rows: Vec<Vec<String>>,
}

/// What a producer says about the job a profile belongs to (every field may be absent); used
/// to group profiles into jobs ([`crate::jobs`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobMeta {
    /// Ranks in the job (`distributedInfo.world_size`, Ascend's `profiler_info` `rank_size`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The producer's trace id (one per recorded trace: the same id twice is the same trace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Host name, when written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The process that recorded the host side (the pid of the first host op).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<String>,
    /// A run identifier given by the producer (rlprof: the save path of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// One (collection, rank) or one foreign trace file.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// The file (raw file, trace file or ASCEND_PROFILER_OUTPUT directory).
    pub source: PathBuf,
    /// Its format.
    pub format: SourceFormat,
    /// Rank.
    pub rank: u32,
    /// Group label: `step1/e2e` for our collections, the parent directory for foreign files.
    pub group: String,
    /// Steps covered, when known.
    pub steps: Vec<u64>,
    /// Absolute origin of the profile's times (wall-clock ns; 0 when the producer gives none).
    pub origin_ns: u64,
    /// Interned strings.
    #[serde(skip)]
    pub strings: Vec<String>,
    /// String index by hash (the string itself is kept once, in `strings`).
    #[serde(skip)]
    index: HashMap<u64, u32>,
    /// Strings whose hash another string already has.
    #[serde(skip)]
    collisions: HashMap<String, u32>,
    /// Events, any order.
    #[serde(skip)]
    pub events: Vec<Event>,
    /// Details referenced by events (read them with [`Profile::detail`]).
    #[serde(skip)]
    pub details: Vec<Detail>,
    /// Details kept as source text, referenced with [`RAW_DETAIL`].
    #[serde(skip)]
    pub raw_details: RawDetails,
    /// Device memory events (or the only memory events, when the producer does not say which
    /// device), in time order.
    #[serde(skip)]
    pub memory: Vec<MemEvent>,
    /// Host (CPU) memory events, in time order; never added to [`Profile::memory`].
    #[serde(skip)]
    pub host_memory: Vec<MemEvent>,
    /// The producer's per-op allocations with their releases (torch_npu's `OP_MEMORY` /
    /// `operator_memory.csv`), when [`Profile::memory`] is the producer's running total: what
    /// was live at the peak is told from these.
    #[serde(skip)]
    pub op_allocations: Vec<OpAllocation>,
    /// What the producer says about the job.
    pub meta: JobMeta,
    /// Names of threads/streams, by thread number.
    #[serde(skip)]
    pub threads: Vec<String>,
    /// Foreign side tables.
    pub tables: Vec<Table>,
    /// Remarks about completeness (truncation by a cap, corruption, dropped events).
    pub notes: Vec<String>,
}

impl Profile {
    /// An empty profile.
    pub fn new(source: PathBuf, format: SourceFormat, rank: u32, group: String) -> Profile {
        Profile {
            source,
            format,
            rank,
            group,
            steps: Vec::new(),
            origin_ns: 0,
            strings: Vec::new(),
            index: HashMap::new(),
            collisions: HashMap::new(),
            events: Vec::new(),
            details: Vec::new(),
            raw_details: RawDetails::default(),
            memory: Vec::new(),
            host_memory: Vec::new(),
            op_allocations: Vec::new(),
            meta: JobMeta::default(),
            threads: Vec::new(),
            tables: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Interns a string (kept once: the index holds its hash, not a copy).
    pub fn intern(&mut self, s: &str) -> u32 {
        use std::hash::BuildHasher;
        let h = rustc_hash::FxBuildHasher.hash_one(s);
        match self.index.get(&h) {
            Some(&i) if self.strings[i as usize] == s => i,
            Some(_) => {
                if let Some(&i) = self.collisions.get(s) {
                    return i;
                }
                let i = self.strings.len() as u32;
                self.strings.push(s.to_string());
                self.collisions.insert(s.to_string(), i);
                i
            }
            None => {
                let i = self.strings.len() as u32;
                self.strings.push(s.to_string());
                self.index.insert(h, i);
                i
            }
        }
    }

    /// The string at an index (empty for [`NONE`] or out of range).
    pub fn str(&self, i: u32) -> &str {
        self.strings
            .get(i as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// Adds a detail and returns its index.
    pub fn add_detail(&mut self, d: Detail) -> u32 {
        self.details.push(d);
        (self.details.len() - 1) as u32
    }

    /// The detail of an event, if any (decoded here when it is kept as text).
    pub fn detail(&self, e: &Event) -> Option<Cow<'_, Detail>> {
        if e.detail != NONE && e.detail & RAW_DETAIL != 0 {
            let (text, track) = self.raw_details.text((e.detail & !RAW_DETAIL) as usize)?;
            let decode = self.raw_details.decode?;
            return Some(Cow::Owned(decode(track, text)));
        }
        self.details.get(e.detail as usize).map(Cow::Borrowed)
    }

    /// The event's detail when the reader decoded it while loading (rlprof's raw files, the
    /// Ascend DB), without decoding a foreign trace's raw `args` text: for figures, such as a
    /// collective's wait, that only those readers record.
    pub fn decoded_detail(&self, e: &Event) -> Option<&Detail> {
        if e.detail == NONE || e.detail & RAW_DETAIL != 0 {
            return None;
        }
        self.details.get(e.detail as usize)
    }

    /// A short label: `rank 0 · step1/e2e`.
    pub fn label(&self) -> String {
        format!("rank {} · {}", self.rank, self.group)
    }

    /// Sorts events by (track, start, longer first) — the order every consumer relies on.
    ///
    /// A stable sort, done as a stable partition by track (a counting sort) and then a stable
    /// sort of each track's run by (start, longer first), skipped where the run is already in
    /// order: loaders append events in file order, which per track is mostly time order.
    pub fn sort(&mut self) {
        let key = |e: &Event| (e.start, -e.dur);
        if !self.events.is_sorted_by_key(|e| (e.track, key(e))) {
            let mut at = [0usize; Track::ALL.len() + 1];
            for e in &self.events {
                at[e.track as usize + 1] += 1;
            }
            for i in 1..at.len() {
                at[i] += at[i - 1];
            }
            let mut out = vec![self.events.first().copied().unwrap_or(EMPTY); self.events.len()];
            let mut next = at;
            for e in &self.events {
                let t = e.track as usize;
                out[next[t]] = *e;
                next[t] += 1;
            }
            for w in at.windows(2) {
                let run = &mut out[w[0]..w[1]];
                if !run.is_sorted_by_key(key) {
                    run.sort_by_key(key);
                }
            }
            self.events = out;
        }
        self.sort_memory();
    }

    /// [`Profile::sort`] for events whose nesting depth was recorded (our raw collections), in
    /// place: of two events of one thread with the same interval the shallower comes first
    /// (the parent, whatever the order of the file, which holds a child before its parent),
    /// and events equal in track, interval, thread and depth are not nested in each other, so
    /// their order is free. No copy of the events is made: they are most of a large
    /// collection's memory (the stable sort of [`Profile::sort`] copies them).
    pub fn sort_by_recorded_depth(&mut self) {
        let key = |e: &Event| {
            (
                e.track, e.start, -e.dur, e.thread, e.depth, e.name, e.detail,
            )
        };
        if !self.events.is_sorted_by_key(key) {
            self.events.sort_unstable_by_key(key);
        }
        self.sort_memory();
    }

    fn sort_memory(&mut self) {
        for mem in [&mut self.memory, &mut self.host_memory] {
            if !mem.is_sorted_by_key(|m| m.t) {
                mem.sort_by_key(|m| m.t);
            }
        }
    }

    /// Start and end of all events and memory samples (0, 0 when empty).
    pub fn extent(&self) -> (i64, i64) {
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for e in &self.events {
            lo = lo.min(e.start);
            hi = hi.max(e.end());
        }
        for m in &self.memory {
            lo = lo.min(m.t);
            hi = hi.max(m.t);
        }
        if lo > hi { (0, 0) } else { (lo, hi) }
    }
}

/// Longest name shown (bytes); longer names are clipped for display by [`display_name`], the
/// full name is kept once in [`Profile::strings`].
pub const MAX_NAME_DISPLAY: usize = 1024;

/// A name as shown in tables and the timeline: clipped to [`MAX_NAME_DISPLAY`] bytes, with the
/// full length said.
pub fn display_name(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_NAME_DISPLAY {
        return Cow::Borrowed(s);
    }
    let mut cut = MAX_NAME_DISPLAY;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes)", &s[..cut], s.len()))
}

/// An input that was not loaded, with the reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Skipped {
    /// The file or directory.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// Everything found under a path.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Loaded profiles.
    pub profiles: Vec<Profile>,
    /// Inputs skipped.
    pub skipped: Vec<Skipped>,
    /// Remarks on what was found (files ignored as not profiles, duplicates counted once).
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_equals_a_stable_sort_by_track_start_and_longer_first() {
        // Ties (same track, start and duration) keep their order: `name` tells them apart.
        let mut seed = 7u64;
        let mut rand = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for (n, sorted_tracks) in [
            (0, false),
            (1, false),
            (500, false),
            (3000, false),
            (3000, true),
        ] {
            let mut p = Profile::new("x".into(), SourceFormat::TorchTrace, 0, String::new());
            for i in 0..n {
                let start = if sorted_tracks {
                    i as i64
                } else {
                    rand(50) as i64
                };
                p.events.push(Event {
                    start,
                    dur: rand(4) as i64,
                    name: i as u32,
                    detail: NONE,
                    thread: 0,
                    depth: 0,
                    track: Track::ALL[rand(Track::ALL.len() as u64) as usize],
                });
                p.memory.push(MemEvent {
                    t: if sorted_tracks {
                        i as i64
                    } else {
                        rand(30) as i64
                    },
                    delta: i as i64,
                    addr: 0,
                    op: NONE,
                    total: None,
                });
            }
            let mut want = p.events.clone();
            want.sort_by_key(|e| (e.track, e.start, -e.dur));
            let mut want_mem = p.memory.clone();
            want_mem.sort_by_key(|m| m.t);
            p.sort();
            assert_eq!(p.events, want, "{n}");
            assert_eq!(p.memory, want_mem, "{n}");
            p.sort();
            assert_eq!(p.events, want, "{n}, sorted again");
        }
    }
}
