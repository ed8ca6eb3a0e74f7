//! Communication between ranks: the [`Communicator`] trait the trainer uses, the in-process
//! implementation (one worker thread per rank), and [`Traced`], which records every collective as
//! a profiler communication op (name, group, bytes, duration, wait for the slowest peer).
//!
//! Wait time: the in-process transport knows every rank's arrival time at a collective, so it
//! reports `latest arrival - own arrival` exactly. Transports that cannot (MPI) return `None` from
//! [`Communicator::last_wait_ticks`]; [`Traced`] then runs a barrier before the collective while
//! a collection is recording and reports the barrier's duration as the wait (the "barrier probe").
//!
//! Transports in submodules: `mpi` (feature `mpi`: one rank per process under `mpirun`) and
//! `nccl` (feature `nccl`: NCCL collectives bootstrapped over MPI).

use crate::error::{Result, TrainerError};
use rlprof_profiler::{NameId, comm, name, now};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;

/// Environment variables MPI launchers set: (rank variable, size variable).
const LAUNCHER_ENV: [(&str, &str); 2] = [
    ("PMI_RANK", "PMI_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
];

/// The (rank, world size) an MPI launcher (MPICH's hydra, OpenMPI's mpirun) announces to this
/// process, or `None` when no launcher started it. Needs no MPI library.
pub fn launcher_world() -> Option<(usize, usize)> {
    LAUNCHER_ENV.iter().find_map(|(r, s)| {
        let rank = std::env::var(r).ok()?.parse().ok()?;
        let size = std::env::var(s).ok()?.parse().ok()?;
        Some((rank, size))
    })
}

/// Collectives over f32 buffers between the ranks of one job.
pub trait Communicator: Send {
    /// This rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn world_size(&self) -> usize;
    /// Element-wise sum over ranks, in place (the same result on every rank).
    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<()>;
    /// Concatenates every rank's equal-sized `shard` into `out` (`world * shard.len()`).
    fn all_gather(&self, shard: &[f32], out: &mut [f32]) -> Result<()>;
    /// Sums `input` (`world * out.len()`) over ranks and keeps this rank's `out.len()` slice.
    fn reduce_scatter_sum(&self, input: &[f32], out: &mut [f32]) -> Result<()>;
    /// Copies `root`'s buffer to every rank.
    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()>;
    /// Waits for every rank.
    fn barrier(&self) -> Result<()>;
    /// Ticks this rank waited for the slowest peer in the last collective, when known.
    fn last_wait_ticks(&self) -> Option<u64> {
        None
    }
    /// Makes every other rank's pending and future collectives fail (this rank stops).
    fn abort(&self) {}
    /// Like [`Communicator::abort`], telling the peers why (transports that can carry the
    /// reason to other processes do; the default forgets it).
    fn abort_with(&self, reason: &str) {
        let _ = reason;
        self.abort()
    }
}

/// Shared state of the in-process ranks.
struct Hub {
    world: usize,
    state: Mutex<HubState>,
    cv: Condvar,
}

struct HubState {
    /// Deposited buffers of the current collective.
    slots: Vec<Vec<f32>>,
    /// Arrival ticks of the current collective.
    arrivals: Vec<u64>,
    arrived: usize,
    /// Ranks done reading the current collective's slots.
    departed: usize,
    generation: u64,
    aborted: bool,
}

/// In-process ranks: each rank is a thread holding one [`InProcess`]; collectives rendezvous
/// through shared memory and reduce in rank order (deterministic, identical on every rank).
pub struct InProcess {
    rank: usize,
    hub: Arc<Hub>,
    last_wait: std::sync::atomic::AtomicU64,
}

/// How long a rank waits for its peers before declaring the job stuck.
const STUCK: Duration = Duration::from_secs(600);

impl InProcess {
    /// One communicator per rank of a `world`-rank job.
    pub fn group(world: usize) -> Vec<InProcess> {
        let hub = Arc::new(Hub {
            world,
            state: Mutex::new(HubState {
                slots: vec![Vec::new(); world],
                arrivals: vec![0; world],
                arrived: 0,
                departed: 0,
                generation: 0,
                aborted: false,
            }),
            cv: Condvar::new(),
        });
        (0..world)
            .map(|rank| InProcess {
                rank,
                hub: hub.clone(),
                last_wait: Default::default(),
            })
            .collect()
    }

    /// A handle that aborts this group's collectives from anywhere (panic handling).
    pub fn aborter(&self) -> impl Fn() + Send + 'static + use<> {
        let hub = self.hub.clone();
        move || {
            if let Ok(mut st) = hub.state.lock() {
                st.aborted = true;
            }
            hub.cv.notify_all();
        }
    }

    /// Deposits `data`, waits for all ranks, runs `read` over all deposits, then waits until
    /// every rank has read before the slots are reused.
    fn exchange<T>(&self, data: &[f32], read: impl FnOnce(&[Vec<f32>]) -> T) -> Result<T> {
        let hub = &*self.hub;
        let lock = |s| {
            hub.state
                .lock()
                .map_err(|_| TrainerError::Comm("a rank panicked during a collective".into()))
                .map(|g| (g, s))
        };
        let (mut st, _) = lock(())?;
        if st.aborted {
            return Err(aborted());
        }
        // Phase 1: deposit.
        let my_gen = st.generation;
        st.slots[self.rank].clear();
        st.slots[self.rank].extend_from_slice(data);
        st.arrivals[self.rank] = now();
        st.arrived += 1;
        if st.arrived == hub.world {
            hub.cv.notify_all();
        }
        while st.arrived < hub.world && st.generation == my_gen && !st.aborted {
            let (g, to) = hub.cv.wait_timeout(st, STUCK).map_err(|_| poisoned())?;
            st = g;
            if to.timed_out() {
                return Err(TrainerError::Comm(format!(
                    "rank {} waited {}s for its peers",
                    self.rank,
                    STUCK.as_secs()
                )));
            }
        }
        if st.aborted {
            return Err(aborted());
        }
        let latest = st.arrivals.iter().copied().max().unwrap_or(0);
        self.last_wait.store(
            latest.saturating_sub(st.arrivals[self.rank]),
            std::sync::atomic::Ordering::Relaxed,
        );
        let out = read(&st.slots);
        // Phase 2: depart; the last rank out opens the next generation.
        st.departed += 1;
        if st.departed == hub.world {
            st.arrived = 0;
            st.departed = 0;
            st.generation += 1;
            hub.cv.notify_all();
        } else {
            while st.generation == my_gen && !st.aborted {
                st = hub.cv.wait(st).map_err(|_| poisoned())?;
            }
        }
        Ok(out)
    }
}

fn aborted() -> TrainerError {
    TrainerError::Comm("another rank stopped; collective abandoned".into())
}

fn poisoned() -> TrainerError {
    TrainerError::Comm("a rank panicked during a collective".into())
}

impl Communicator for InProcess {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.hub.world
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<()> {
        let mine = buf.to_vec();
        self.exchange(&mine, |slots| {
            buf.fill(0.0);
            for s in slots {
                for (b, x) in buf.iter_mut().zip(s) {
                    *b += x;
                }
            }
        })
    }

    fn all_gather(&self, shard: &[f32], out: &mut [f32]) -> Result<()> {
        let n = shard.len();
        self.exchange(shard, |slots| {
            for (r, s) in slots.iter().enumerate() {
                out[r * n..(r + 1) * n].copy_from_slice(s);
            }
        })
    }

    fn reduce_scatter_sum(&self, input: &[f32], out: &mut [f32]) -> Result<()> {
        let n = out.len();
        let me = self.rank;
        self.exchange(input, |slots| {
            out.fill(0.0);
            for s in slots {
                for (o, x) in out.iter_mut().zip(&s[me * n..(me + 1) * n]) {
                    *o += x;
                }
            }
        })
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        let data: Vec<f32> = if self.rank == root {
            buf.to_vec()
        } else {
            Vec::new()
        };
        self.exchange(&data, |slots| buf.copy_from_slice(&slots[root]))
    }

    fn barrier(&self) -> Result<()> {
        self.exchange(&[], |_| ())
    }

    fn last_wait_ticks(&self) -> Option<u64> {
        Some(self.last_wait.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn abort(&self) {
        if let Ok(mut st) = self.hub.state.lock() {
            st.aborted = true;
        }
        self.hub.cv.notify_all();
    }
}

/// Wraps a transport and records each collective with the profiler (group `dp`).
pub struct Traced<C: Communicator> {
    inner: C,
    group: NameId,
}

impl<C: Communicator> Traced<C> {
    /// Traces `inner`'s collectives.
    pub fn new(inner: C) -> Traced<C> {
        Traced {
            inner,
            group: name!("dp"),
        }
    }

    fn run(&self, op: NameId, bytes: usize, f: impl FnOnce(&C) -> Result<()>) -> Result<()> {
        let mut g = comm(op, self.group, bytes as u64);
        if !g.is_recording() {
            return f(&self.inner);
        }
        let probe = if self.inner.last_wait_ticks().is_none() {
            let t0 = now();
            self.inner.barrier()?;
            Some(now() - t0)
        } else {
            None
        };
        f(&self.inner)?;
        g.set_wait_ticks(probe.or(self.inner.last_wait_ticks()).unwrap_or(0));
        Ok(())
    }
}

impl<C: Communicator> Communicator for Traced<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    fn world_size(&self) -> usize {
        self.inner.world_size()
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<()> {
        self.run(name!("all_reduce"), buf.len() * 4, |c| {
            c.all_reduce_sum(buf)
        })
    }

    fn all_gather(&self, shard: &[f32], out: &mut [f32]) -> Result<()> {
        self.run(name!("all_gather"), out.len() * 4, |c| {
            c.all_gather(shard, out)
        })
    }

    fn reduce_scatter_sum(&self, input: &[f32], out: &mut [f32]) -> Result<()> {
        self.run(name!("reduce_scatter"), input.len() * 4, |c| {
            c.reduce_scatter_sum(input, out)
        })
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        self.run(name!("broadcast"), buf.len() * 4, |c| {
            c.broadcast(buf, root)
        })
    }

    fn barrier(&self) -> Result<()> {
        self.run(name!("barrier"), 0, |c| c.barrier())
    }

    fn last_wait_ticks(&self) -> Option<u64> {
        self.inner.last_wait_ticks()
    }

    fn abort(&self) {
        self.inner.abort()
    }

    fn abort_with(&self, reason: &str) {
        self.inner.abort_with(reason)
    }
}

/// Equal shards of `n` elements over `world` ranks: shard length (the total is padded to
/// `world * shard_len`).
pub fn shard_len(n: usize, world: usize) -> usize {
    n.div_ceil(world)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_ranks<T: Send + 'static>(
        world: usize,
        f: impl Fn(InProcess) -> T + Send + Sync + Clone + 'static,
    ) -> Vec<T> {
        let hs: Vec<_> = InProcess::group(world)
            .into_iter()
            .map(|c| {
                let f = f.clone();
                std::thread::spawn(move || f(c))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn collectives_compute_the_right_values() {
        let out = on_ranks(3, |c| {
            let r = c.rank() as f32;
            let mut a = vec![r, 1.0];
            c.all_reduce_sum(&mut a).unwrap();
            let mut g = vec![0.0; 6];
            c.all_gather(&[r, r * 10.0], &mut g).unwrap();
            let input: Vec<f32> = (0..6).map(|i| i as f32 + r).collect();
            let mut rs = vec![0.0; 2];
            c.reduce_scatter_sum(&input, &mut rs).unwrap();
            let mut b = vec![r; 2];
            c.broadcast(&mut b, 2).unwrap();
            c.barrier().unwrap();
            (a, g, rs, b)
        });
        for (rank, (a, g, rs, b)) in out.iter().enumerate() {
            assert_eq!(a, &vec![3.0, 3.0]);
            assert_eq!(g, &vec![0.0, 0.0, 1.0, 10.0, 2.0, 20.0]);
            let base = (rank * 2) as f32;
            assert_eq!(rs, &vec![3.0 * base + 3.0, 3.0 * (base + 1.0) + 3.0]);
            assert_eq!(b, &vec![2.0, 2.0]);
        }
    }

    #[test]
    fn abort_releases_waiting_peers() {
        let mut group = InProcess::group(2);
        let b = group.pop().unwrap();
        let a = group.pop().unwrap();
        let h = std::thread::spawn(move || a.barrier());
        std::thread::sleep(Duration::from_millis(50));
        b.abort();
        assert!(h.join().unwrap().is_err());
    }
}
