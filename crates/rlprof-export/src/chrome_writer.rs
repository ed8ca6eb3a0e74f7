//! Streaming Chrome trace-event writer shared by the `torch` trace and the npu `trace_view.json`.
//!
//! Events are formatted by hand into a reusable byte buffer (no per-event JSON tree, no
//! `format!`), every interned string (names, shapes as `Input Dims`, dtype lists) is converted
//! to its JSON text once per id, the text that depends only on an event's kind and track (pid,
//! tid) is formatted once per track and reused, and times are microseconds with 3 decimals
//! relative to a base, so a trace of millions of events is written at disk speed with bounded
//! memory.

use crate::attrib::{Out, RangeInfo};
use crate::decode::{CommEv, Event, Index, KernelEv, MemEv};
use crate::dense::DenseMap;
use crate::memory::MemTracker;
use crate::text_format;
pub(crate) use crate::text_format::json_str;
use rlprof_profiler::record::RangeCat;
use std::io::Write;

/// Which consumer family the trace is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// PyTorch profiler (kineto) layout: `traceEvents` object, `cpu_op`, `kernel`, `ac2g` flows.
    Torch,
    /// Ascend `trace_view.json`: a bare array; device process named `Ascend Hardware`.
    Ascend,
}

/// Pids and tids of the trace's tracks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tracks {
    /// Host process id.
    pub host_pid: u64,
    /// Device process id (kernels).
    pub device_pid: u64,
    /// Communication track's pid.
    pub comm_pid: u64,
}

/// Converts interned strings to JSON text once per id.
#[derive(Default)]
struct JsonCache {
    strs: DenseMap<Box<[u8]>>,
    dims: DenseMap<Box<[u8]>>,
    lists: DenseMap<Box<[u8]>>,
}

/// Slots of the cache of track pieces ([`ChromeWriter::piece`]).
const PIECE_SLOTS: usize = 256;

/// Piece kinds: the head of a complete event per category, the `pid`/`tid`/`ts` keys of a flow
/// event, the first arguments of a kernel.
mod piece {
    pub(super) const CPU_OP: u8 = 1;
    pub(super) const CUDA_RUNTIME: u8 = 2;
    pub(super) const API: u8 = 3;
    pub(super) const RUNTIME: u8 = 4;
    pub(super) const PYTHON_FUNCTION: u8 = 5;
    pub(super) const USER_ANNOTATION: u8 = 6;
    pub(super) const KERNEL: u8 = 7;
    pub(super) const FLOW_TRACK: u8 = 8;
    pub(super) const KERNEL_ARGS: u8 = 9;
}

/// A cached piece: `(kind, pid, tid)` and its text.
type Piece = Option<((u8, u64, u64), text_format::Short<64>)>;

fn cached(map: &mut DenseMap<Box<[u8]>>, id: u32, make: impl FnOnce(&mut Vec<u8>)) -> &[u8] {
    map.get_or_insert_with(id, || {
        let mut v = Vec::new();
        make(&mut v);
        v.into_boxed_slice()
    })
}

/// The name prefix of a step range in the raw data (and of verl's torch profiler steps).
pub(crate) const PROFILER_STEP: &str = "ProfilerStep#";
/// The name prefix of the RL step range in a torch trace: `rlprof_step#N`. There, as in verl's
/// torch traces, `ProfilerStep#k` marks update mini-batches (`rlprof report` reads a trace with
/// `rlprof_step#N` rows so: the RL steps are the steps, `ProfilerStep#k` a user range).
pub(crate) const RL_STEP: &str = "rlprof_step#";

/// Writes one trace's events.
pub(crate) struct ChromeWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    first: bool,
    base_ns: u64,
    flavor: Flavor,
    tracks: Tracks,
    json: JsonCache,
    ts_text: text_format::UsCache,
    /// Events written (excluding metadata).
    pub events: u64,
    streams: std::collections::BTreeSet<u16>,
    /// Event text that depends only on the kind and track, by `(kind, pid, tid)` (direct-mapped).
    pieces: Vec<Piece>,
}

impl<W: Write> ChromeWriter<W> {
    /// Starts a trace; `prefix` is written before the first event (`{"...": ..., "traceEvents": [`
    /// or `[`).
    pub(crate) fn new(
        mut out: W,
        prefix: &str,
        base_ns: u64,
        flavor: Flavor,
        tracks: Tracks,
    ) -> std::io::Result<Self> {
        out.write_all(prefix.as_bytes())?;
        Ok(ChromeWriter {
            out,
            buf: Vec::with_capacity((1 << 20) + (1 << 14)),
            first: true,
            base_ns,
            flavor,
            tracks,
            json: JsonCache::default(),
            ts_text: text_format::UsCache::default(),
            events: 0,
            streams: Default::default(),
            pieces: vec![None; PIECE_SLOTS],
        })
    }

    #[inline]
    fn sep(&mut self) {
        if !self.first {
            self.buf.extend_from_slice(b",\n");
        }
        self.first = false;
    }

    #[inline]
    fn lit(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn num(&mut self, v: u64) {
        text_format::uint(&mut self.buf, v);
    }

    /// The JSON string of a name id.
    #[inline]
    fn name(&mut self, idx: &Index, id: u32) {
        let s = cached(&mut self.json.strs, id, |v| json_str(v, idx.name(id)));
        self.buf.extend_from_slice(s);
    }

    /// Appends the text `build` makes for `(kind, pid, tid)`, formatted once per track and kind
    /// while it stays in its cache slot (`build` must depend on nothing else); a text too long
    /// for the cache is formatted every time.
    #[inline]
    fn piece(&mut self, kind: u8, pid: u64, tid: u64, build: impl FnOnce(&mut Vec<u8>)) {
        let key = (kind, pid, tid);
        let slot = (tid as usize)
            .wrapping_mul(16)
            .wrapping_add(kind as usize)
            .wrapping_add((pid as usize).wrapping_mul(7))
            % PIECE_SLOTS;
        if let Some((k, t)) = &self.pieces[slot]
            && *k == key
        {
            t.put(&mut self.buf);
            return;
        }
        let start = self.buf.len();
        build(&mut self.buf);
        if let Some(t) = text_format::Short::new(&self.buf[start..]) {
            self.pieces[slot] = Some((key, t));
        }
    }

    /// `,"pid":P,"tid":T,"ts":` of a flow event.
    #[inline]
    fn flow_track(&mut self, pid: u64, tid: u64) {
        self.piece(piece::FLOW_TRACK, pid, tid, |b| {
            b.extend_from_slice(b",\"pid\":");
            text_format::uint(b, pid);
            b.extend_from_slice(b",\"tid\":");
            text_format::uint(b, tid);
            b.extend_from_slice(b",\"ts\":");
        });
    }

    #[inline]
    fn ts(&mut self, ns: u64) {
        self.ts_text
            .us3(&mut self.buf, ns.saturating_sub(self.base_ns));
    }

    /// Hands the buffer to the writer in 1 MiB pieces (large enough for a `BufWriter` below to
    /// pass them straight through).
    fn maybe_flush(&mut self) -> std::io::Result<()> {
        if self.buf.len() > 1 << 20 {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A metadata event (`process_name`, `thread_name`, `process_labels`, ...).
    pub(crate) fn metadata(
        &mut self,
        name: &str,
        pid: u64,
        tid: Option<u64>,
        key: &str,
        value: &str,
    ) {
        self.sep();
        self.lit("{\"ph\":\"M\",\"name\":\"");
        self.lit(name);
        self.lit("\",\"pid\":");
        self.num(pid);
        self.lit(",");
        if let Some(t) = tid {
            self.lit("\"tid\":");
            self.num(t);
            self.lit(",");
        }
        self.lit("\"ts\":0,\"args\":{\"");
        self.lit(key);
        self.lit("\":");
        json_str(&mut self.buf, value);
        self.lit("}}");
    }

    /// Writes the metadata naming the host threads and processes.
    pub(crate) fn track_metadata(&mut self, idx: &Index) {
        let t = self.tracks;
        let (host, device, comm) = match self.flavor {
            Flavor::Torch => ("python", "CPU engine", "Communication"),
            Flavor::Ascend => ("Python", "Ascend Hardware", "Communication"),
        };
        let rank = idx.meta.rank;
        self.metadata("process_name", t.host_pid, None, "name", host);
        self.metadata(
            "process_labels",
            t.host_pid,
            None,
            "labels",
            &format!("CPU rank {rank}"),
        );
        self.metadata("process_sort_index", t.host_pid, None, "sort_index", "0");
        self.metadata("process_name", t.device_pid, None, "name", device);
        self.metadata(
            "process_labels",
            t.device_pid,
            None,
            "labels",
            &format!("{} 0", self.device_label(idx)),
        );
        if self.flavor == Flavor::Ascend {
            self.metadata("process_name", t.comm_pid, None, "name", comm);
        }
        for (tid, name) in idx.threads.clone() {
            self.metadata("thread_name", t.host_pid, Some(tid as u64), "name", &name);
        }
    }

    fn device_label(&self, _idx: &Index) -> &'static str {
        match self.flavor {
            Flavor::Torch => "CPU engine",
            Flavor::Ascend => "NPU",
        }
    }

    /// Writes one attributed event.
    pub(crate) fn push(&mut self, idx: &Index, out: &Out, mem: &MemTracker) -> std::io::Result<()> {
        match out {
            Out::Range(r) => self.range(idx, r),
            Out::Kernel(k, op) => self.kernel(idx, k, op.map(|o| o.ext_id)),
            Out::Other(Event::Comm(c)) => self.comm(idx, c),
            Out::Other(Event::Memory(m)) => self.memory(m, mem),
            Out::Other(Event::Instant(t, ts, name, v)) => self.instant(idx, *t, *ts, *name, *v),
            Out::Other(Event::Counter(t, ts, name, v)) => self.counter(idx, *t, *ts, *name, *v),
            Out::Other(_) => {}
        }
        self.maybe_flush()
    }

    /// `kind` is the [`piece`] kind of `cat`.
    fn complete_head(
        &mut self,
        (cat, kind): (&'static str, u8),
        pid: u64,
        tid: u64,
        start: u64,
        end: u64,
    ) {
        self.sep();
        self.events += 1;
        self.piece(kind, pid, tid, |b| {
            b.extend_from_slice(b"{\"ph\":\"X\",\"cat\":\"");
            b.extend_from_slice(cat.as_bytes());
            b.extend_from_slice(b"\",\"pid\":");
            text_format::uint(b, pid);
            b.extend_from_slice(b",\"tid\":");
            text_format::uint(b, tid);
            b.extend_from_slice(b",\"ts\":");
        });
        self.ts(start);
        self.lit(",\"dur\":");
        text_format::us3(&mut self.buf, end - start);
        self.lit(",\"name\":");
    }

    fn range(&mut self, idx: &Index, ri: &RangeInfo) {
        let r = &ri.r;
        let cat = match RangeCat::from_u8(r.cat) {
            Some(RangeCat::Op) => ("cpu_op", piece::CPU_OP),
            Some(RangeCat::Api) => match self.flavor {
                Flavor::Torch => ("cuda_runtime", piece::CUDA_RUNTIME),
                Flavor::Ascend => ("api", piece::API),
            },
            Some(RangeCat::Runtime) => ("runtime", piece::RUNTIME),
            Some(RangeCat::Span) => ("python_function", piece::PYTHON_FUNCTION),
            _ => ("user_annotation", piece::USER_ANNOTATION),
        };
        self.complete_head(cat, self.tracks.host_pid, r.thread as u64, r.start, r.end);
        match RangeCat::from_u8(r.cat) {
            // A torch trace marks the RL step `rlprof_step#N`: `ProfilerStep#k` there is verl's
            // per-mini-batch step ([`ChromeWriter::host_annotation`]).
            Some(RangeCat::Step) if self.flavor == Flavor::Torch => {
                let label = idx.name(r.name);
                let n = label.strip_prefix(PROFILER_STEP).unwrap_or(label);
                let mut v = Vec::new();
                json_str(&mut v, &format!("{RL_STEP}{n}"));
                self.buf.extend_from_slice(&v);
            }
            _ => self.name(idx, r.name),
        }
        self.lit(",\"args\":{");
        if ri.ext_id != 0 {
            let ext = text_format::Short::<24>::uint(ri.ext_id);
            self.lit("\"External id\":");
            ext.put(&mut self.buf);
            if self.flavor == Flavor::Torch {
                // The kernels' `correlation`: HolisticTraceAnalysis keeps the kernels of the
                // complete `ProfilerStep#k` by joining them to host events on it (torch's
                // runtime launches carry it; an op is rlprof's launch).
                self.lit(",\"correlation\":");
                ext.put(&mut self.buf);
            }
            if r.shapes != 0 {
                self.lit(",\"Input Dims\":");
                let s = cached(&mut self.json.dims, r.shapes, |v| {
                    input_dims(v, idx.name(r.shapes))
                });
                self.buf.extend_from_slice(s);
            }
            if r.dtypes != 0 {
                self.lit(",\"Input type\":");
                let s = cached(&mut self.json.lists, r.dtypes, |v| {
                    string_list(v, idx.name(r.dtypes))
                });
                self.buf.extend_from_slice(s);
            }
            if r.stack != 0 {
                self.lit(",\"Call stack\":");
                self.name(idx, r.stack);
            }
            if r.module != 0 {
                self.lit(",\"Module Hierarchy\":");
                self.name(idx, r.module);
            }
            if r.seq != 0 {
                self.lit(",\"Sequence number\":");
                self.num(r.seq as u64);
            }
            self.lit("}}");
            if ri.dev_self > 0 {
                self.flow_start(r.thread as u64, r.start, &ext);
            }
            if r.seq != 0 {
                self.fwdbwd(r);
            }
            return;
        }
        if let Some(it) = r.iter_id {
            self.lit("\"iteration\":");
            self.num(it);
        }
        self.lit("}}");
    }

    /// The `s` end of the host-to-device flow of an op (a separate event after the op).
    fn flow_start(&mut self, tid: u64, ts: u64, id: &text_format::Short<24>) {
        self.sep();
        self.lit("{\"ph\":\"s\",\"id\":");
        id.put(&mut self.buf);
        self.flow_track(self.tracks.host_pid, tid);
        self.ts(ts);
        self.lit(self.flow_tail());
    }

    /// The `fwdbwd` flow end of an op with an autograd sequence number, as PyTorch writes it: the
    /// forward op starts the flow, its backward op (`evaluate_function`) ends it.
    fn fwdbwd(&mut self, r: &crate::decode::RangeEv) {
        self.sep();
        self.lit(if r.backward {
            "{\"ph\":\"f\",\"bp\":\"e\",\"id\":"
        } else {
            "{\"ph\":\"s\",\"id\":"
        });
        self.num(r.seq as u64);
        self.flow_track(self.tracks.host_pid, r.thread as u64);
        self.ts(r.start);
        self.lit(",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\"}");
    }

    /// The category and name of a flow event, closing it.
    fn flow_tail(&self) -> &'static str {
        match self.flavor {
            Flavor::Torch => ",\"cat\":\"ac2g\",\"name\":\"ac2g\"}",
            Flavor::Ascend => ",\"cat\":\"HostToDevice\",\"name\":\"HostToDevice\"}",
        }
    }

    /// Writes one kernel with the external id of the op that issued it (what [`Self::push`]
    /// writes for `Out::Kernel`, for callers that keep only the id).
    pub(crate) fn push_kernel(
        &mut self,
        idx: &Index,
        k: &KernelEv,
        ext_id: Option<u64>,
    ) -> std::io::Result<()> {
        self.kernel(idx, k, ext_id);
        self.maybe_flush()
    }

    fn kernel(&mut self, idx: &Index, k: &KernelEv, op: Option<u64>) {
        self.streams.insert(k.stream);
        let (pid, tid) = (self.tracks.device_pid, k.stream as u64);
        self.complete_head(("kernel", piece::KERNEL), pid, tid, k.start, k.end);
        self.name(idx, k.name);
        self.piece(piece::KERNEL_ARGS, pid, tid, |b| {
            b.extend_from_slice(b",\"args\":{\"device\":0,\"stream\":");
            text_format::uint(b, tid);
            b.extend_from_slice(b",\"correlation\":");
        });
        let ext = text_format::Short::<24>::uint(op.unwrap_or(0));
        ext.put(&mut self.buf);
        if op.is_some() {
            self.lit(",\"External id\":");
            ext.put(&mut self.buf);
        }
        if k.flops > 0 {
            self.lit(",\"flops\":");
            self.num(k.flops);
        }
        if k.bytes > 0 {
            self.lit(",\"bytes\":");
            self.num(k.bytes);
        }
        self.lit("}}");
        if op.is_some() {
            self.sep();
            self.lit("{\"ph\":\"f\",\"bp\":\"e\",\"id\":");
            ext.put(&mut self.buf);
            self.flow_track(pid, tid);
            self.ts(k.start);
            self.lit(self.flow_tail());
        }
    }

    fn comm(&mut self, idx: &Index, c: &CommEv) {
        let (pid, tid) = match self.flavor {
            Flavor::Torch => (self.tracks.host_pid, c.thread as u64),
            Flavor::Ascend => (self.tracks.comm_pid, 0),
        };
        self.complete_head(("cpu_op", piece::CPU_OP), pid, tid, c.start, c.end);
        match self.flavor {
            Flavor::Torch => self.lit("\"record_param_comms\""),
            Flavor::Ascend => self.name(idx, c.name),
        }
        self.lit(",\"args\":{\"Collective name\":");
        self.name(idx, c.name);
        self.lit(",\"Process Group Name\":");
        self.name(idx, c.group);
        self.lit(",\"Group size\":");
        self.num(idx.meta.world_size as u64);
        self.lit(",\"Bytes\":");
        self.num(c.bytes);
        self.lit(",\"Wait Time(us)\":");
        text_format::us3(&mut self.buf, c.wait_ns);
        if let Some(p) = c.peer {
            self.lit(",\"Peer rank\":");
            self.num(p as u64);
        }
        self.lit("}}");
    }

    fn memory(&mut self, m: &MemEv, mem: &MemTracker) {
        self.sep();
        self.events += 1;
        self.lit("{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"pid\":");
        self.num(self.tracks.host_pid);
        self.lit(",\"tid\":");
        self.num(m.thread as u64);
        self.lit(",\"ts\":");
        self.ts(m.ts);
        let signed = if m.free {
            -(m.bytes as i64)
        } else {
            m.bytes as i64
        };
        self.lit(",\"args\":{\"Device Type\":0,\"Device Id\":");
        self.num(m.device as u64);
        self.lit(",\"Addr\":");
        self.num(m.addr);
        self.lit(",\"Bytes\":");
        text_format::int(&mut self.buf, signed);
        self.lit(",\"Total Allocated\":");
        self.num(mem.allocated);
        self.lit(",\"Total Reserved\":");
        self.num(mem.reserved());
        self.lit("}}");
    }

    fn instant(&mut self, idx: &Index, t: u32, ts: u64, name: u32, v: u64) {
        self.sep();
        self.events += 1;
        self.lit("{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"instant\",\"pid\":");
        self.num(self.tracks.host_pid);
        self.lit(",\"tid\":");
        self.num(t as u64);
        self.lit(",\"ts\":");
        self.ts(ts);
        self.lit(",\"name\":");
        self.name(idx, name);
        self.lit(",\"args\":{\"value\":");
        self.num(v);
        self.lit("}}");
    }

    fn counter(&mut self, idx: &Index, _t: u32, ts: u64, name: u32, v: u64) {
        self.sep();
        self.events += 1;
        self.lit("{\"ph\":\"C\",\"pid\":");
        self.num(self.tracks.host_pid);
        self.lit(",\"ts\":");
        self.ts(ts);
        self.lit(",\"name\":");
        self.name(idx, name);
        self.lit(",\"args\":{\"value\":");
        self.num(v);
        self.lit("}}");
    }

    /// Writes `suffix` (`]` or `], ...}`) and returns the inner writer.
    /// A host `user_annotation` range `name` on thread `thread`, `[start, end)` in wall ns (a
    /// range the raw data has no record of: verl's per-mini-batch `ProfilerStep#k`).
    pub(crate) fn host_annotation(
        &mut self,
        thread: u32,
        start: u64,
        end: u64,
        name: &str,
    ) -> std::io::Result<()> {
        self.complete_head(
            ("user_annotation", piece::USER_ANNOTATION),
            self.tracks.host_pid,
            thread as u64,
            start,
            end,
        );
        let mut v = Vec::new();
        json_str(&mut v, name);
        self.buf.extend_from_slice(&v);
        self.lit(",\"args\":{}}");
        self.maybe_flush()
    }

    pub(crate) fn finish(mut self, suffix: &str) -> std::io::Result<W> {
        self.lit(suffix);
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(self.out)
    }

    /// Names the device streams seen (call before `finish`).
    pub(crate) fn stream_metadata(&mut self) {
        let streams: Vec<u16> = self.streams.iter().copied().collect();
        for s in streams {
            let pid = self.tracks.device_pid;
            self.metadata(
                "thread_name",
                pid,
                Some(s as u64),
                "name",
                &format!("stream {s}"),
            );
        }
    }
}

/// `"32,64;64,128"` -> `[[32,64],[64,128]]` (an empty string gives `[]`).
pub(crate) fn input_dims(out: &mut Vec<u8>, shapes: &str) {
    out.push(b'[');
    for (i, s) in shapes.split(';').filter(|s| !s.is_empty()).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        let dims = s.split(',').filter(|d| d.parse::<u64>().is_ok());
        for (j, d) in dims.enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.extend_from_slice(d.as_bytes());
        }
        out.push(b']');
    }
    out.push(b']');
}

/// `"float32;int64"` -> `["float32","int64"]`.
pub(crate) fn string_list(out: &mut Vec<u8>, list: &str) {
    out.push(b'[');
    for (i, s) in list.split(';').filter(|s| !s.is_empty()).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, s);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrib::Attributor;
    use rlprof_profiler::raw::RawWriter;
    use rlprof_profiler::record::{Kind, Record};

    /// Many threads and streams, so that cached track pieces collide in their slots and are
    /// replaced: every event must still carry its own pid, tid and category.
    #[test]
    fn cached_track_pieces_follow_every_track() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank_0.rlraw");
        let mut w = RawWriter::create(&path).unwrap();
        w.write_meta(&serde_json::json!({"tool": "npu", "level": "level1", "rank": 0, "pid": 77}))
            .unwrap();
        w.write_strings([(1, "op"), (2, "k")]).unwrap();
        let cats = [
            RangeCat::Op,
            RangeCat::Api,
            RangeCat::Runtime,
            RangeCat::User,
        ];
        for round in 0..3u64 {
            for t in 0..700u32 {
                let t0 = round * 1_000_000 + t as u64 * 100;
                let cat = cats[(t as usize + round as usize) % cats.len()] as u8;
                w.write_records(
                    t,
                    &[
                        Record::new(t0 + 1, t0 + 5, 2, Kind::Kernel, 0, (t % 300) as u16),
                        Record::new(t0, t0 + 10, 1, Kind::Range, cat, 0),
                        Record::new(0, 0, 0, Kind::Ext, 0, 0),
                    ],
                )
                .unwrap();
            }
        }
        drop(w);
        let idx = Index::build(&path).unwrap();
        let tracks = Tracks {
            host_pid: 77,
            device_pid: 1_000_000,
            comm_pid: 2_000_000,
        };
        let mut cw = ChromeWriter::new(Vec::new(), "[", 0, Flavor::Ascend, tracks).unwrap();
        let mem = MemTracker::default();
        let mut attr = Attributor::default();
        let mut expect = Vec::new();
        let mut push = |o: Out, cw: &mut ChromeWriter<Vec<u8>>| {
            match &o {
                Out::Range(r) => expect.push((r.r.thread as u64, r.r.cat, r.ext_id)),
                Out::Kernel(k, op) => expect.push((k.stream as u64, 0, op.map_or(0, |o| o.ext_id))),
                Out::Other(_) => {}
            }
            cw.push(&idx, &o, &mem).unwrap();
        };
        idx.replay(|e| attr.push(e, &mut |o| push(o, &mut cw)))
            .unwrap();
        attr.finish(&mut |o| push(o, &mut cw));
        let text = cw.finish("]").unwrap();
        let evs: Vec<serde_json::Value> = serde_json::from_slice(&text).unwrap();
        let mut xs = evs.iter().filter(|e| e["ph"] == "X");
        let mut flows = 0;
        for (tid, cat, ext) in &expect {
            let e = xs.next().unwrap();
            assert_eq!(e["tid"], *tid, "{e}");
            if *cat == 0 {
                assert_eq!(
                    (&e["pid"], &e["cat"]),
                    (&1_000_000.into(), &"kernel".into())
                );
                assert_eq!(e["args"]["stream"], *tid);
                assert_eq!(e["args"]["correlation"], *ext);
            } else {
                let want = match RangeCat::from_u8(*cat).unwrap() {
                    RangeCat::Op => "cpu_op",
                    RangeCat::Api => "api",
                    RangeCat::Runtime => "runtime",
                    _ => "user_annotation",
                };
                assert_eq!((&e["pid"], &e["cat"]), (&77.into(), &want.into()), "{e}");
            }
        }
        assert!(xs.next().is_none());
        for f in evs.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
            let pid = if f["ph"] == "s" { 77 } else { 1_000_000 };
            assert_eq!(f["pid"], pid);
            flows += 1;
        }
        // One op per thread and round carries a kernel (the ops category).
        let ops = expect.iter().filter(|e| e.1 == RangeCat::Op as u8).count();
        assert_eq!(flows, 2 * ops);
    }

    /// A forward op and its backward op with the same autograd sequence number are linked by a
    /// `fwdbwd` flow (start on the forward op, end on the backward op), for both flavours.
    #[test]
    fn fwdbwd_flows_link_forward_and_backward_ops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank_0.rlraw");
        let mut w = RawWriter::create(&path).unwrap();
        w.write_meta(&serde_json::json!({"tool": "torch", "rank": 0, "pid": 5}))
            .unwrap();
        w.write_strings([(1, "linear"), (2, "LinearBackward0"), (3, "m")])
            .unwrap();
        let op = RangeCat::Op as u8;
        w.write_records(
            0,
            &[
                Record::new(10, 20, 1, Kind::Range, op, 0),
                Record::new(3, 0, 7, Kind::Ext, 0, 0),
                Record::new(30, 40, 1, Kind::Range, op, 0),
                Record::new(3, 0, 0, Kind::Ext, 0, 0),
                Record::new(50, 70, 2, Kind::Range, op, 0),
                Record::new(3, 0, 7, Kind::Ext, 1, 0),
            ],
        )
        .unwrap();
        drop(w);
        let idx = Index::build(&path).unwrap();
        for flavor in [Flavor::Torch, Flavor::Ascend] {
            let tracks = Tracks {
                host_pid: 5,
                device_pid: 9,
                comm_pid: 5,
            };
            let mut cw = ChromeWriter::new(Vec::new(), "[", 0, flavor, tracks).unwrap();
            let mem = MemTracker::default();
            let mut attr = Attributor::default();
            idx.replay(|e| attr.push(e, &mut |o| cw.push(&idx, &o, &mem).unwrap()))
                .unwrap();
            let text = cw.finish("]").unwrap();
            let evs: Vec<serde_json::Value> = serde_json::from_slice(&text).unwrap();
            let flows: Vec<&serde_json::Value> =
                evs.iter().filter(|e| e["cat"] == "fwdbwd").collect();
            assert_eq!(flows.len(), 2, "{evs:?}");
            let (s, f) = (flows[0], flows[1]);
            assert_eq!((&s["ph"], &f["ph"]), (&"s".into(), &"f".into()));
            assert_eq!((&s["id"], &f["id"]), (&7.into(), &7.into()));
            let ts = |name: &str| {
                evs.iter()
                    .find(|e| e["ph"] == "X" && e["name"] == name)
                    .map(|e| e["ts"].clone())
                    .unwrap()
            };
            // the first `linear` (with the sequence number) starts it, the backward ends it
            let first_linear = evs.iter().find(|e| e["name"] == "linear").unwrap();
            assert_eq!(first_linear["args"]["Sequence number"], 7);
            assert_eq!(s["ts"], first_linear["ts"]);
            assert_eq!(f["ts"], ts("LinearBackward0"));
            assert_eq!(f["bp"], "e");
        }
    }
}
