//! Running a whole job: in-process ranks on threads ([`run`]) or this process's one rank of a
//! multi-process job ([`run_process`]), with the process-wide set-up (per-rank CPU threads, the
//! host allocator) and the metrics file's default path.

use super::sink::{EventSink, MetricsWriter};
use super::{Event, run_rank};
use crate::comm::{Communicator, InProcess, Traced};
use crate::config::TrainConfig;
use crate::error::{Result, TrainerError};
use crate::{RunOptions, RunSummary};
use rlprof_profiler::Profiler;
use std::time::Instant;

/// Gives each of `local_ranks` ranks of this process its share of the cores for candle's CPU
/// kernels (once per process: the first job's share stays), unless the user set `CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS`. Must run before the
/// first tensor op. Without it, every rank thread feeds candle's one global spinning thread pool
/// and the ranks spin against each other (measured: 3.9x slower steps with 2 ranks on 2 cores).
pub fn configure_engine_threads(local_ranks: usize) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_rank = (cores / local_ranks.max(1)).max(1).to_string();
        for var in ["CANDLE_NUM_THREADS", "RAYON_NUM_THREADS"] {
            if std::env::var_os(var).is_none() {
                // SAFETY: once per process, before this job's rank threads and tensor ops start.
                // Rust's own environment reads (other threads' `std::env::var`) take the same
                // lock as this write; no C code of this process reads the environment on another
                // thread at this point (MPI and CUDA are called from the rank threads, later).
                unsafe { std::env::set_var(var, &per_rank) };
            }
        }
    });
}

/// Keeps freed tensor memory in glibc's heap instead of returning it to the kernel after every
/// op (tensors of a few hundred KiB are mmap'ed and page-faulted afresh by default; measured ~20%
/// of `update_actor` on the peer workload). Process-wide: call it from a program's `main`.
pub fn tune_host_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocation thresholds; valid at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// Runs this process's one rank of a job whose ranks are separate processes (`comm` connects
/// them, e.g. MPI under `mpirun`). The communicator's world size must equal
/// `trainer.nnodes * trainer.n_gpus_per_node`. Rank 0 writes the metrics and calls the
/// callbacks; the summary's `final_params` are this rank's (identical on every rank). `cfg` is
/// the job config read once by the caller ([`TrainConfig::from_doc`]).
pub fn run_process<C: Communicator>(
    cfg: &TrainConfig,
    profiler: Profiler,
    opts: RunOptions,
    comm: C,
) -> Result<RunSummary> {
    let (rank, world) = (comm.rank(), comm.world_size());
    if world != cfg.world_size() {
        return Err(TrainerError::Config(vec![format!(
            "trainer.nnodes * trainer.n_gpus_per_node = {} x {} = {} ranks, but the launcher \
             started {world} processes; make them equal (e.g. mpirun -np {} or \
             trainer.n_gpus_per_node={})",
            cfg.trainer.nnodes,
            cfg.trainer.n_gpus_per_node,
            cfg.world_size(),
            cfg.world_size(),
            world / cfg.trainer.nnodes.max(1) as usize,
        )]));
    }
    // Ranks sharing this host share its cores (MPICH: MPI_LOCALNRANKS, OpenMPI: ..._LOCAL_SIZE).
    let local = ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse::<usize>().ok())
        .unwrap_or(1);
    configure_engine_threads(local);
    let t0 = Instant::now();
    let metrics_path = opts
        .metrics_path
        .clone()
        .unwrap_or_else(|| default_metrics_path(cfg));
    let writer = match rank {
        0 => Some(MetricsWriter::create(&metrics_path)?),
        _ => None,
    };
    let rp = profiler.rank(rank as u32);
    let _bound = rp.bind_thread();
    let mut sink = EventSink::new(&opts, writer);
    let mut report = |ev: Event| sink.deliver(ev);
    let out = run_rank(cfg, &rp, Traced::new(comm), opts.max_steps, &mut report)?;
    let metrics = sink.finish()?;
    Ok(RunSummary {
        steps: out.steps,
        world_size: world as u32,
        wall_s: t0.elapsed().as_secs_f64(),
        metrics_path,
        metrics,
        final_params: out.params,
        optimizer_state_len: vec![out.optimizer_state_len],
        num_params: out.num_params,
    })
}

/// `{default_local_dir}/metrics-{ms}-{pid}.jsonl`: the process id keeps two runs started in the
/// same millisecond apart (and [`MetricsWriter::create`] never opens an existing file).
fn default_metrics_path(cfg: &TrainConfig) -> std::path::PathBuf {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    // Several runs of one process (tests, notebooks) get a sequence number too.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    let name = match seq {
        0 => format!("metrics-{ts}-{pid}.jsonl"),
        n => format!("metrics-{ts}-{pid}-{n}.jsonl"),
    };
    cfg.trainer.default_local_dir.join(name)
}

/// Runs the job with `trainer.nnodes * trainer.n_gpus_per_node` in-process ranks. `cfg` is
/// the job config read once by the caller ([`TrainConfig::from_doc`]).
pub fn run(cfg: &TrainConfig, profiler: Profiler, opts: RunOptions) -> Result<RunSummary> {
    let world = cfg.world_size();
    configure_engine_threads(world);
    let t0 = Instant::now();
    let metrics_path = opts
        .metrics_path
        .clone()
        .unwrap_or_else(|| default_metrics_path(cfg));
    let writer = MetricsWriter::create(&metrics_path)?;
    let (tx, rx) = std::sync::mpsc::channel::<Event>();
    let mut handles = Vec::new();
    for comm in InProcess::group(world) {
        let (cfg, prof, tx) = (cfg.clone(), profiler.clone(), tx.clone());
        let max = opts.max_steps;
        let rank = comm.rank();
        let aborter = comm.aborter();
        let h = std::thread::Builder::new()
            .name(format!("rank-{rank}"))
            .spawn(move || {
                let rp = prof.rank(rank as u32);
                let _bound = rp.bind_thread();
                let mut send = |e: Event| {
                    let _ = tx.send(e);
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_rank(&cfg, &rp, Traced::new(comm), max, &mut send)
                }));
                match r {
                    Ok(r) => r,
                    Err(p) => {
                        aborter();
                        Err(TrainerError::RankPanicked {
                            rank,
                            message: panic_message(&p),
                        })
                    }
                }
            })
            .map_err(|e| TrainerError::Comm(format!("cannot start rank {rank}: {e}")))?;
        handles.push(h);
    }
    drop(tx);
    let mut sink = EventSink::new(&opts, Some(writer));
    for ev in rx {
        sink.deliver(ev);
    }
    let mut outcomes = Vec::new();
    let mut first_err: Option<TrainerError> = None;
    for (rank, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(o)) => outcomes.push(o),
            Ok(Err(e)) => {
                // Keep the root cause, not the peers' "collective abandoned" follow-ups.
                let follow_up = matches!(e, TrainerError::Comm(_));
                if first_err.is_none()
                    || (!follow_up && matches!(first_err, Some(TrainerError::Comm(_))))
                {
                    first_err = Some(e);
                }
            }
            Err(p) => {
                first_err = first_err.or(Some(TrainerError::RankPanicked {
                    rank,
                    message: panic_message(&p),
                }))
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let metrics = sink.finish()?;
    Ok(RunSummary {
        steps: outcomes.first().map_or(0, |o| o.steps),
        world_size: world as u32,
        wall_s: t0.elapsed().as_secs_f64(),
        metrics_path,
        metrics,
        final_params: outcomes
            .first()
            .map(|o| o.params.clone())
            .unwrap_or_default(),
        optimizer_state_len: outcomes.iter().map(|o| o.optimizer_state_len).collect(),
        num_params: outcomes.first().map_or(0, |o| o.num_params),
    })
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
