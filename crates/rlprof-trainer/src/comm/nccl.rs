//! Collectives over NCCL (through `cudarc`, NCCL and the CUDA driver loaded at run time, so this
//! compiles without a CUDA toolkit), bootstrapped by broadcasting NCCL's unique id over MPI.
//!
//! The trainer's communicator works on host `f32` slices (the CPU engine's tensors). This layer
//! copies the host data to the rank's device, runs the NCCL collective on the rank's stream and
//! copies the result back. With the CUDA engine the copies are the price of sharing one trait;
//! they are timed together with the collective and reported as such. Barriers and failure
//! notices go over the MPI communicator the NCCL one was bootstrapped from.
//!
//! Several ranks may share one device (the GPU check runs 2 ranks on 1 GPU): NCCL supports
//! that only in separate processes, which is what `mpirun -np 2` gives.

use super::Communicator;
use super::mpi::MpiComm;
use crate::error::{Result, TrainerError};
use cudarc::driver::{CudaSlice, CudaStream};
use cudarc::nccl::safe::{Comm, Id, ReduceOp};
use std::sync::Arc;

fn cuda<E: std::fmt::Debug>(e: E) -> TrainerError {
    TrainerError::Comm(format!("CUDA: {e:?}"))
}

fn nccl<E: std::fmt::Debug>(e: E) -> TrainerError {
    TrainerError::Comm(format!("NCCL: {e:?}"))
}

/// One rank's NCCL communicator on device `ordinal`.
pub struct NcclComm {
    comm: Comm,
    stream: Arc<CudaStream>,
    mpi: MpiComm,
}

// SAFETY: the NCCL communicator and stream are used by one thread at a time (the rank's
// worker); NCCL communicators may be used from any thread when calls are not concurrent.
unsafe impl Send for NcclComm {}

impl NcclComm {
    /// Creates the communicator of this MPI rank on device `ordinal`: rank 0 makes the NCCL
    /// unique id and broadcasts its 128 bytes over MPI.
    pub fn bootstrap(mpi: &MpiComm, ordinal: usize) -> Result<NcclComm> {
        // cudarc panics when it cannot load the driver library: make that an error.
        let ctx = std::panic::catch_unwind(|| cudarc::driver::CudaContext::new(ordinal))
            .map_err(|_| {
                TrainerError::Comm(
                    "CUDA: the driver library (libcuda.so) could not be loaded; NCCL needs a GPU \
                     machine (LD_LIBRARY_PATH may need the driver's directory)"
                        .into(),
                )
            })?
            .map_err(cuda)?;
        let stream = ctx.default_stream();
        // The 128-byte id travels as 128 f32 values (each an exact small integer).
        let mut bytes = [0f32; 128];
        if mpi.rank() == 0 {
            let id = Id::new().map_err(nccl)?;
            for (b, c) in bytes.iter_mut().zip(id.internal().iter()) {
                *b = *c as u8 as f32;
            }
        }
        mpi.broadcast(&mut bytes, 0)?;
        let mut internal = [0 as core::ffi::c_char; 128];
        for (c, b) in internal.iter_mut().zip(bytes.iter()) {
            *c = *b as u8 as core::ffi::c_char;
        }
        let comm = Comm::from_rank(
            stream.clone(),
            mpi.rank(),
            mpi.world_size(),
            Id::uninit(internal),
        )
        .map_err(nccl)?;
        Ok(NcclComm {
            comm,
            stream,
            mpi: mpi.clone(),
        })
    }

    fn to_device(&self, host: &[f32]) -> Result<CudaSlice<f32>> {
        self.stream.clone_htod(host).map_err(cuda)
    }

    fn to_host(&self, dev: &CudaSlice<f32>, host: &mut [f32]) -> Result<()> {
        self.stream.memcpy_dtoh(dev, host).map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)
    }
}

impl Communicator for NcclComm {
    fn rank(&self) -> usize {
        self.mpi.rank()
    }

    fn world_size(&self) -> usize {
        self.mpi.world_size()
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<()> {
        let mut d = self.to_device(buf)?;
        self.comm
            .all_reduce_in_place(&mut d, &ReduceOp::Sum)
            .map_err(nccl)?;
        self.to_host(&d, buf)
    }

    fn all_gather(&self, shard: &[f32], out: &mut [f32]) -> Result<()> {
        let d_send = self.to_device(shard)?;
        let mut d_recv = self.stream.alloc_zeros::<f32>(out.len()).map_err(cuda)?;
        self.comm.all_gather(&d_send, &mut d_recv).map_err(nccl)?;
        self.to_host(&d_recv, out)
    }

    fn reduce_scatter_sum(&self, input: &[f32], out: &mut [f32]) -> Result<()> {
        let d_send = self.to_device(input)?;
        let mut d_recv = self.stream.alloc_zeros::<f32>(out.len()).map_err(cuda)?;
        self.comm
            .reduce_scatter(&d_send, &mut d_recv, &ReduceOp::Sum)
            .map_err(nccl)?;
        self.to_host(&d_recv, out)
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        let mut d = self.to_device(buf)?;
        self.comm
            .broadcast_in_place(&mut d, root as i32)
            .map_err(nccl)?;
        self.to_host(&d, buf)
    }

    fn barrier(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda)?;
        self.mpi.barrier()
    }

    fn abort_with(&self, reason: &str) {
        self.mpi.abort_with(reason)
    }
}
