//! `trace_view.json`'s own thread: batches of attributed events go to it through a bounded
//! channel and come back empty for reuse, so the trace is formatted while the CSVs are
//! written.

use crate::ExportError;
use crate::attrib::{Out, RangeInfo};
use crate::chrome_writer::{ChromeWriter, Flavor, Tracks};
use crate::decode::{Event, Index, KernelEv};
use crate::memory::MemTracker;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

/// One attributed event, owned, for the trace thread; a memory event carries the running
/// allocation total after it (the trace shows it).
#[derive(Clone, Copy)]
pub(super) enum Item {
    Range(RangeInfo),
    /// A kernel with the external id of its op (all the trace shows of the op).
    Kernel(KernelEv, Option<u64>),
    Other(Event, u64),
}

/// Events per batch (a few hundred KiB: small enough to be read back from cache).
const BATCH: usize = 2048;
/// Batches in flight to the trace thread.
const BATCHES_IN_FLIGHT: usize = 4;

pub(super) type TraceWriter = ChromeWriter<BufWriter<File>>;

/// The sending side of the trace thread: batches go out full, and come back empty for reuse.
pub(super) struct TraceFeed {
    pub(super) batch: Vec<Item>,
    pub(super) tx: Option<SyncSender<Vec<Item>>>,
    pub(super) spare: Receiver<Vec<Item>>,
}

impl TraceFeed {
    /// Starts the thread that writes `trace` (within `scope`, as it borrows `idx`).
    pub(super) fn start<'s, 'e: 's>(
        scope: &'s std::thread::Scope<'s, 'e>,
        idx: &'e Index,
        trace: TraceWriter,
    ) -> std::io::Result<(
        TraceFeed,
        std::thread::ScopedJoinHandle<'s, std::io::Result<TraceWriter>>,
    )> {
        let (tx, rx) = sync_channel(BATCHES_IN_FLIGHT);
        let (spare_tx, spare) = channel();
        let worker = std::thread::Builder::new()
            .name("rlprof-trace".into())
            .spawn_scoped(scope, move || write_trace(idx, trace, rx, spare_tx))?;
        let feed = TraceFeed {
            batch: Vec::with_capacity(BATCH),
            tx: Some(tx),
            spare,
        };
        Ok((feed, worker))
    }

    /// Queues one event; false once the thread has stopped (it failed: its join says why).
    #[inline]
    pub(super) fn push(&mut self, o: &Out, allocated: u64) -> bool {
        self.batch.push(match o {
            Out::Range(r) => Item::Range(*r),
            Out::Kernel(k, op) => Item::Kernel(*k, op.map(|o| o.ext_id)),
            Out::Other(e) => Item::Other(**e, allocated),
        });
        self.batch.len() < BATCH || self.send()
    }

    pub(super) fn send(&mut self) -> bool {
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        let full = std::mem::replace(&mut self.batch, next);
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(full).is_ok());
        if !sent {
            self.tx = None;
        }
        sent
    }

    /// Sends what is queued and ends the stream.
    pub(super) fn close(&mut self) {
        if !self.batch.is_empty() {
            self.send();
        }
        self.tx = None;
    }
}

/// The trace thread: formats every batch into `trace`, hands the emptied batch back.
fn write_trace(
    idx: &Index,
    mut trace: TraceWriter,
    batches: Receiver<Vec<Item>>,
    spare: Sender<Vec<Item>>,
) -> std::io::Result<TraceWriter> {
    let mut mem = MemTracker::default();
    for mut batch in batches {
        for it in &batch {
            match it {
                Item::Range(r) => trace.push(idx, &Out::Range(*r), &mem)?,
                Item::Kernel(k, ext) => trace.push_kernel(idx, k, *ext)?,
                Item::Other(e, allocated) => {
                    mem.allocated = *allocated;
                    trace.push(idx, &Out::Other(e), &mem)?
                }
            }
        }
        batch.clear();
        let _ = spare.send(batch);
    }
    Ok(trace)
}

/// `trace_view.json` opened, with the track metadata written.
pub(super) fn trace_writer(idx: &Index, path: &Path) -> Result<TraceWriter, ExportError> {
    let f = rlprof_profiler::collection::safe_fs::create(path).map_err(ExportError::io(path))?;
    let tracks = Tracks {
        host_pid: idx.meta.pid as u64,
        device_pid: 1_000_000 + idx.meta.rank as u64,
        comm_pid: 2_000_000 + idx.meta.rank as u64,
    };
    let mut trace = ChromeWriter::new(
        BufWriter::with_capacity(1 << 16, f),
        "[\n",
        0,
        Flavor::Ascend,
        tracks,
    )
    .map_err(ExportError::io(path))?;
    trace.track_metadata(idx);
    Ok(trace)
}
