//! How `rlprof train` runs its ranks: as threads of this process (the default), or one rank per
//! process when an MPI launcher started it (`mpirun -np N rlprof train ...`, feature `mpi`).

use anyhow::Result;

/// This process's place in the job.
#[derive(Clone)]
pub(crate) enum Ranks {
    /// Every rank is a thread of this process.
    InProcess,
    /// This process is one MPI rank.
    #[cfg(feature = "mpi")]
    Mpi(rlprof_trainer::comm::mpi::MpiComm),
}

impl Ranks {
    /// Looks at the launcher's environment; initialises MPI when it started several processes.
    pub(crate) fn detect() -> Result<Ranks> {
        match rlprof_trainer::comm::launcher_world() {
            Some((_, n)) if n > 1 => start_mpi(n),
            _ => Ok(Ranks::InProcess),
        }
    }

    /// This process's rank (0 in-process: it drives every rank).
    pub(crate) fn rank(&self) -> usize {
        match self {
            Ranks::InProcess => 0,
            #[cfg(feature = "mpi")]
            Ranks::Mpi(c) => rlprof_trainer::comm::Communicator::rank(c),
        }
    }

    /// Whether ranks are separate processes.
    pub(crate) fn is_multi_process(&self) -> bool {
        !matches!(self, Ranks::InProcess)
    }

    /// Runs the job (this process's share of it).
    pub(crate) fn run(
        &self,
        cfg: &rlprof_trainer::TrainConfig,
        profiler: rlprof_profiler::Profiler,
        opts: rlprof_trainer::RunOptions,
    ) -> Result<rlprof_trainer::RunSummary, rlprof_trainer::TrainerError> {
        match self {
            Ranks::InProcess => rlprof_trainer::run(cfg, profiler, opts),
            #[cfg(feature = "mpi")]
            Ranks::Mpi(c) => rlprof_trainer::run_process(cfg, profiler, opts, c.clone()),
        }
    }

    /// Ends a failed run of a multi-process job just before exiting: a rank that learned of a
    /// peer's failure tells that peer it is done (so the launcher does not kill it early).
    pub(crate) fn finish_failed(&self) {
        #[cfg(feature = "mpi")]
        if let Ranks::Mpi(c) = self {
            c.acknowledge_failure();
        }
    }

    /// Ends a successful run (MPI: finalise; every rank does).
    pub(crate) fn finish(&self) {
        #[cfg(feature = "mpi")]
        if let Ranks::Mpi(c) = self {
            c.finalize();
        }
    }
}

#[cfg(feature = "mpi")]
fn start_mpi(_n: usize) -> Result<Ranks> {
    let comm = rlprof_trainer::comm::mpi::MpiComm::init()?;
    Ok(Ranks::Mpi(comm))
}

#[cfg(not(feature = "mpi"))]
fn start_mpi(n: usize) -> Result<Ranks> {
    anyhow::bail!(
        "an MPI launcher started this process as one of {n} ranks, but this rlprof was built \
         without MPI support; rebuild with `cargo build --release -p rlprof-cli --features mpi`, \
         or run one process with in-process ranks (trainer.n_gpus_per_node={n})"
    )
}

/// Test hook: `RLPROF_TEST_FINAL_PARAMS=FILE` makes rank 0 write its final actor parameters
/// there (little-endian f32), to compare runs.
pub(crate) fn write_final_params(ranks: &Ranks, params: &[f32]) -> Result<()> {
    if ranks.rank() != 0 {
        return Ok(());
    }
    if let Some(path) = std::env::var_os("RLPROF_TEST_FINAL_PARAMS") {
        let bytes: Vec<u8> = params.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(&path, bytes)?;
    }
    Ok(())
}
