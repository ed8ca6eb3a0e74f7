//! Collectives over MPI for trainer ranks that are separate processes (`mpirun -np N`).
//!
//! A thin, safe layer over the `mpi` crate (rsmpi) shaped like the trainer's `Communicator`
//! trait: f32 all-reduce (sum), all-gather, reduce-scatter, broadcast and barrier, on the world
//! communicator, one rank per process.
//!
//! Where rsmpi lacks something, this is how it is worked around:
//! - no `MPI_IN_PLACE`: the in-place all-reduce and broadcast-free paths copy the input into a
//!   reusable scratch buffer and reduce from it (one extra memcpy of the buffer);
//! - no varying-count reduce-scatter (`MPI_Reduce_scatter` with counts) and the trainer's shards
//!   may be unequal: inputs are zero-padded to `world * ceil(n / world)` and
//!   `reduce_scatter_block_into` is used; this rank's part of the padded result is then copied
//!   out. All-gather of unequal shards pads the same way;
//! - nonblocking collectives do not progress on their own in MPICH/OpenMPI; all calls here are
//!   blocking, and the trainer overlaps nothing, so no communication thread is needed.
//!
//! MPI is initialised with `MPI_THREAD_MULTIPLE` requested (the profiler's flusher thread makes
//! no MPI calls, so `FUNNELED` is enough and accepted).

#[cfg(feature = "nccl")]
pub mod nccl;

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::cell::RefCell;

/// Errors of the MPI layer.
#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    /// `MPI_Init` failed or MPI was already initialised.
    #[error("MPI initialisation failed (already initialised, or not started by mpirun?)")]
    Init,
    /// Buffer sizes do not fit the collective.
    #[error("{op}: {detail}")]
    Shape {
        /// The collective.
        op: &'static str,
        /// What does not fit.
        detail: String,
    },
}

/// The world communicator of this process (rank, size) and the collectives.
pub struct MpiComm {
    // Field order matters: the communicator must drop before the universe finalises MPI.
    world: SimpleCommunicator,
    _universe: mpi::environment::Universe,
    scratch: RefCell<Vec<f32>>,
    scratch2: RefCell<Vec<f32>>,
}

impl MpiComm {
    /// Initialises MPI. Fails when MPI is already initialised in this process.
    pub fn init() -> Result<MpiComm, MpiError> {
        let (universe, _threading) =
            mpi::initialize_with_threading(mpi::Threading::Multiple).ok_or(MpiError::Init)?;
        let world = universe.world();
        Ok(MpiComm {
            world,
            _universe: universe,
            scratch: RefCell::new(Vec::new()),
            scratch2: RefCell::new(Vec::new()),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// The processor (host) name MPI reports.
    pub fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_default()
    }

    /// In-place sum over all ranks.
    pub fn all_reduce_sum(&self, buf: &mut [f32]) {
        let mut s = self.scratch.borrow_mut();
        s.clear();
        s.extend_from_slice(buf);
        self.world
            .all_reduce_into(&s[..], buf, SystemOperation::sum());
    }

    /// Gathers every rank's `send` (equal lengths) into `recv` (`size * send.len()`), rank order.
    pub fn all_gather(&self, send: &[f32], recv: &mut [f32]) -> Result<(), MpiError> {
        if recv.len() != send.len() * self.size() {
            return Err(MpiError::Shape {
                op: "all_gather",
                detail: format!(
                    "recv has {} elements, expected {} x {}",
                    recv.len(),
                    self.size(),
                    send.len()
                ),
            });
        }
        self.world.all_gather_into(send, recv);
        Ok(())
    }

    /// Sums `send` (`total` elements) over ranks and leaves in `recv` this rank's part
    /// `[offset, offset + recv.len())`, where parts follow [`shard_range`]. Unequal parts are
    /// handled by padding.
    pub fn reduce_scatter_sum(&self, send: &[f32], recv: &mut [f32]) -> Result<(), MpiError> {
        let n = self.size();
        let block = send.len().div_ceil(n);
        let (lo, hi) = shard_range(send.len(), n, self.rank());
        if recv.len() != hi - lo {
            return Err(MpiError::Shape {
                op: "reduce_scatter",
                detail: format!(
                    "recv has {} elements, this rank's shard {}",
                    recv.len(),
                    hi - lo
                ),
            });
        }
        let mut padded = self.scratch.borrow_mut();
        padded.clear();
        padded.resize(block * n, 0.0);
        // Pad each rank's shard to `block` so that block i holds shard i.
        for r in 0..n {
            let (a, b) = shard_range(send.len(), n, r);
            padded[r * block..r * block + (b - a)].copy_from_slice(&send[a..b]);
        }
        let mut out = self.scratch2.borrow_mut();
        out.clear();
        out.resize(block, 0.0);
        self.world
            .reduce_scatter_block_into(&padded[..], &mut out[..], SystemOperation::sum());
        recv.copy_from_slice(&out[..recv.len()]);
        Ok(())
    }

    /// All-gather of unequal shards laid out by [`shard_range`]: `full` receives every rank's
    /// shard at its offset; this rank's shard is `full[shard_range(..)]` on entry.
    pub fn all_gather_shards(&self, full: &mut [f32]) {
        let n = self.size();
        let block = full.len().div_ceil(n);
        let (lo, hi) = shard_range(full.len(), n, self.rank());
        let mut send = self.scratch.borrow_mut();
        send.clear();
        send.resize(block, 0.0);
        send[..hi - lo].copy_from_slice(&full[lo..hi]);
        let mut recv = self.scratch2.borrow_mut();
        recv.clear();
        recv.resize(block * n, 0.0);
        self.world.all_gather_into(&send[..], &mut recv[..]);
        for r in 0..n {
            let (a, b) = shard_range(full.len(), n, r);
            full[a..b].copy_from_slice(&recv[r * block..r * block + (b - a)]);
        }
    }

    /// Broadcasts `buf` from `root` to every rank.
    pub fn broadcast(&self, buf: &mut [f32], root: usize) {
        self.world.process_at_rank(root as i32).broadcast_into(buf);
    }

    /// Broadcasts raw bytes from `root` (e.g. an NCCL unique id).
    pub fn broadcast_bytes(&self, buf: &mut [u8], root: usize) {
        self.world.process_at_rank(root as i32).broadcast_into(buf);
    }

    /// Blocks until every rank arrives.
    pub fn barrier(&self) {
        self.world.barrier();
    }
}

/// The `[lo, hi)` range of rank `rank`'s shard of `n` elements over `world` ranks: contiguous
/// shards of `ceil(n / world)` elements, the last ones shorter (possibly empty).
///
/// ```
/// assert_eq!(rlprof_mpi::shard_range(10, 3, 0), (0, 4));
/// assert_eq!(rlprof_mpi::shard_range(10, 3, 2), (8, 10));
/// assert_eq!(rlprof_mpi::shard_range(2, 3, 2), (2, 2));
/// ```
pub fn shard_range(n: usize, world: usize, rank: usize) -> (usize, usize) {
    let block = n.div_ceil(world.max(1));
    let lo = (rank * block).min(n);
    let hi = ((rank + 1) * block).min(n);
    (lo, hi)
}
