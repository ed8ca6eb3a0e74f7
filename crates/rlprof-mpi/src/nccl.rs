//! Collectives over NCCL (through `cudarc`, NCCL and the CUDA driver loaded at run time, so this
//! compiles without a CUDA toolkit), bootstrapped by broadcasting NCCL's unique id over MPI.
//!
//! The trainer's communicator works on host `f32` slices (the CPU engine's tensors). This layer
//! keeps one device buffer pair per rank, copies the host data in, runs the NCCL collective on
//! the rank's stream and copies the result back. With the CUDA engine the copies are the price
//! of sharing one trait; they are timed together with the collective and reported as such.
//!
//! Several ranks may share one device (the GPU check runs 2 ranks on 1 GPU): NCCL supports
//! that only in separate processes, which is what `mpirun -np 2` gives.

use crate::{shard_range, MpiComm};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cudarc::nccl::safe::{Comm, Id, ReduceOp};
use std::sync::Arc;

/// Errors of the NCCL layer.
#[derive(Debug, thiserror::Error)]
pub enum NcclError {
    /// CUDA driver call failed (no driver, no device, out of memory...).
    #[error("CUDA: {0}")]
    Cuda(String),
    /// NCCL call failed (library not found, init failed...).
    #[error("NCCL: {0}")]
    Nccl(String),
}

fn cuda<E: std::fmt::Debug>(e: E) -> NcclError {
    NcclError::Cuda(format!("{e:?}"))
}

fn nccl<E: std::fmt::Debug>(e: E) -> NcclError {
    NcclError::Nccl(format!("{e:?}"))
}

/// One rank's NCCL communicator on device `ordinal`.
pub struct NcclComm {
    comm: Comm,
    stream: Arc<CudaStream>,
    rank: usize,
    world: usize,
}

impl NcclComm {
    /// Creates the communicator of this MPI rank on device `ordinal`: rank 0 makes the NCCL
    /// unique id and broadcasts its 128 bytes over MPI.
    pub fn bootstrap(mpi: &MpiComm, ordinal: usize) -> Result<NcclComm, NcclError> {
        let ctx = CudaContext::new(ordinal).map_err(cuda)?;
        let stream = ctx.default_stream();
        let mut bytes = [0u8; 128];
        if mpi.rank() == 0 {
            let id = Id::new().map_err(nccl)?;
            for (b, c) in bytes.iter_mut().zip(id.internal().iter()) {
                *b = *c as u8;
            }
        }
        mpi.broadcast_bytes(&mut bytes, 0);
        let mut internal = [0 as core::ffi::c_char; 128];
        for (c, b) in internal.iter_mut().zip(bytes.iter()) {
            *c = *b as core::ffi::c_char;
        }
        let comm = Comm::from_rank(stream.clone(), mpi.rank(), mpi.size(), Id::uninit(internal))
            .map_err(nccl)?;
        Ok(NcclComm {
            comm,
            stream,
            rank: mpi.rank(),
            world: mpi.size(),
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.world
    }

    fn to_device(&self, host: &[f32]) -> Result<CudaSlice<f32>, NcclError> {
        self.stream.clone_htod(host).map_err(cuda)
    }

    fn to_host(&self, dev: &CudaSlice<f32>, host: &mut [f32]) -> Result<(), NcclError> {
        self.stream.memcpy_dtoh(dev, host).map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)
    }

    /// In-place sum over all ranks.
    pub fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<(), NcclError> {
        let mut d = self.to_device(buf)?;
        self.comm
            .all_reduce_in_place(&mut d, &ReduceOp::Sum)
            .map_err(nccl)?;
        self.to_host(&d, buf)
    }

    /// Sum over ranks of `send`, this rank's [`shard_range`] part into `recv` (padded blocks).
    pub fn reduce_scatter_sum(&self, send: &[f32], recv: &mut [f32]) -> Result<(), NcclError> {
        let n = self.world;
        let block = send.len().div_ceil(n);
        let mut padded = vec![0f32; block * n];
        for r in 0..n {
            let (a, b) = shard_range(send.len(), n, r);
            padded[r * block..r * block + (b - a)].copy_from_slice(&send[a..b]);
        }
        let d_send = self.to_device(&padded)?;
        let mut d_recv = self.stream.alloc_zeros::<f32>(block).map_err(cuda)?;
        self.comm
            .reduce_scatter(&d_send, &mut d_recv, &ReduceOp::Sum)
            .map_err(nccl)?;
        let mut out = vec![0f32; block];
        self.to_host(&d_recv, &mut out)?;
        recv.copy_from_slice(&out[..recv.len()]);
        Ok(())
    }

    /// All-gather of [`shard_range`] shards into `full` (this rank's shard is in place).
    pub fn all_gather_shards(&self, full: &mut [f32]) -> Result<(), NcclError> {
        let n = self.world;
        let block = full.len().div_ceil(n);
        let (lo, hi) = shard_range(full.len(), n, self.rank);
        let mut send = vec![0f32; block];
        send[..hi - lo].copy_from_slice(&full[lo..hi]);
        let d_send = self.to_device(&send)?;
        let mut d_recv = self.stream.alloc_zeros::<f32>(block * n).map_err(cuda)?;
        self.comm.all_gather(&d_send, &mut d_recv).map_err(nccl)?;
        let mut out = vec![0f32; block * n];
        self.to_host(&d_recv, &mut out)?;
        for r in 0..n {
            let (a, b) = shard_range(full.len(), n, r);
            full[a..b].copy_from_slice(&out[r * block..r * block + (b - a)]);
        }
        Ok(())
    }

    /// Broadcast from `root`.
    pub fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<(), NcclError> {
        let mut d = self.to_device(buf)?;
        self.comm
            .broadcast_in_place(&mut d, root as i32)
            .map_err(nccl)?;
        self.to_host(&d, buf)
    }
}
