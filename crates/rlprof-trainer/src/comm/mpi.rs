//! Ranks as separate processes (`mpirun -np N rlprof train ...`): the [`Communicator`] over MPI
//! (the `mpi` crate, rsmpi 0.8; MPICH or OpenMPI), one rank per process.
//!
//! How the collectives map onto MPI, and where rsmpi lacks something:
//! - every collective is started as its nonblocking form (`MPI_Iallreduce`, `MPI_Iallgather`,
//!   `MPI_Ireduce_scatter_block`, `MPI_Ibcast`, `MPI_Ibarrier`) and completed by polling
//!   `MPI_Test` on the calling thread. Polling drives MPI's progress engine (nonblocking
//!   collectives do not progress on their own in MPICH/OpenMPI), and lets a rank stop waiting
//!   when a peer reports a failure or a deadline passes, instead of hanging in a blocking call.
//!   rsmpi's scoped requests panic when dropped incomplete, so the calls go through `mpi::ffi`;
//! - there is no `MPI_IN_PLACE` in rsmpi (and this layer avoids it too): the input is copied into
//!   a send buffer owned by the communicator and the result is received into a second owned
//!   buffer, then copied out (one extra copy each way). Owning both buffers means an abandoned
//!   collective (peer failed) never writes into memory the caller may free: the buffers of an
//!   abandoned request are leaked on purpose;
//! - the trait's reduce-scatter has equal shards (the trainer pads to `world * shard`), which is
//!   exactly `MPI_Reduce_scatter_block`; no varying-count form is needed.
//!
//! Failure handling (the "dying rank"): a rank whose training fails calls
//! [`Communicator::abort_with`], which sends a notice (its rank and the error) to every other
//! rank on a duplicated control communicator and waits (bounded) for their acknowledgements.
//! A rank polling a collective probes the control communicator, so it stops with
//! `rank R failed: ...`, closes its profiling collections on the way out, and acknowledges
//! ([`MpiComm::acknowledge_failure`]) once its output is written; then both exit non-zero. A
//! peer that disappears without a notice (killed) is handled by the launcher (MPICH's hydra
//! kills the job; with `-disable-auto-cleanup` the waiting ranks notice that a same-host peer's
//! process is gone: pids are exchanged at start-up) and, failing that, by the collective deadline (`RLPROF_MPI_TIMEOUT_S`,
//! default 600 s).
//!
//! Wait time: MPI does not say when the slowest peer arrived, so [`Communicator::last_wait_ticks`]
//! is `None` and [`super::Traced`] measures it with a barrier probe before each recorded
//! collective.

use super::Communicator;
use crate::error::{Result, TrainerError};
use ::mpi::collective::CommunicatorCollectives as _;
use ::mpi::ffi;
use ::mpi::raw::AsRaw;
use ::mpi::topology::Communicator as _;
use std::os::raw::c_int;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Tag of failure notices and acknowledgements on the control communicator.
const TAG_NOTICE: c_int = 7301;
/// How long a failing rank waits for its peers to acknowledge its notice.
const ACK_WAIT: Duration = Duration::from_secs(30);

/// A raw MPI communicator handle that may cross threads (calls are serialised by [`Shared`]).
#[derive(Clone, Copy)]
struct RawComm(ffi::MPI_Comm);

// SAFETY: an MPI communicator handle is a plain identifier; MPI is initialised with at least
// `MPI_THREAD_SERIALIZED` and every call through it is serialised by `Shared::io`.
unsafe impl Send for RawComm {}
// SAFETY: as for `Send`: calls through the handle are serialised by `Shared::io`.
unsafe impl Sync for RawComm {}

/// Buffers the collectives run on (owned, so an abandoned request never touches caller memory).
#[derive(Default)]
struct Io {
    send: Vec<f32>,
    recv: Vec<f32>,
}

/// What this rank knows about failures in the job.
#[derive(Default)]
struct Failure {
    /// A peer that reported a failure: (rank, message).
    peer: Option<(usize, String)>,
    /// A collective was abandoned: no further collective may run.
    broken: bool,
    /// This rank already sent its notice or acknowledgement.
    notified: bool,
}

struct Shared {
    universe: Mutex<Option<::mpi::environment::Universe>>,
    world: RawComm,
    ctrl: RawComm,
    rank: usize,
    size: usize,
    /// Peers on this host: (rank, pid), watched while waiting.
    local_peers: Vec<(usize, u32)>,
    timeout: Duration,
    io: Mutex<Io>,
    failure: Mutex<Failure>,
}

// SAFETY: the universe is only dropped (MPI_Finalize) through `MpiComm::finalize`, under its
// mutex; all other fields are plain data or mutex-protected.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`: shared access goes through the mutexes.
unsafe impl Sync for Shared {}

/// This process's rank of the MPI world (a cheap handle; clones share one communicator).
#[derive(Clone)]
pub struct MpiComm {
    shared: Arc<Shared>,
}

impl MpiComm {
    /// Initialises MPI (threading `MULTIPLE` requested, `SERIALIZED` required) and duplicates the
    /// world communicator for failure notices.
    pub fn init() -> Result<MpiComm> {
        let (universe, threading) = ::mpi::initialize_with_threading(::mpi::Threading::Multiple)
            .ok_or_else(|| TrainerError::Comm("MPI is already initialised".into()))?;
        if threading < ::mpi::Threading::Serialized {
            return Err(TrainerError::Comm(format!(
                "the MPI library provides threading level {threading:?}; rlprof needs Serialized"
            )));
        }
        let world = universe.world();
        let ctrl = world.duplicate();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let local_peers = local_peers(&world, rank);
        let (world_raw, ctrl_raw) = (RawComm(world.as_raw()), RawComm(ctrl.as_raw()));
        // The duplicate lives until MPI_Finalize (freeing it would need every rank's cooperation).
        std::mem::forget(ctrl);
        Ok(MpiComm {
            shared: Arc::new(Shared {
                universe: Mutex::new(Some(universe)),
                world: world_raw,
                ctrl: ctrl_raw,
                rank,
                size,
                local_peers,
                timeout: timeout_from_env(),
                io: Mutex::new(Io::default()),
                failure: Mutex::new(Failure::default()),
            }),
        })
    }

    /// The processor (host) name MPI reports.
    pub fn host(&self) -> String {
        ::mpi::environment::processor_name().unwrap_or_default()
    }

    /// Finalises MPI after a successful run (every rank must call it). After a failure, exit the
    /// process instead: peers may still be inside an abandoned collective.
    pub fn finalize(&self) {
        if let Ok(mut u) = self.shared.universe.lock() {
            u.take();
        }
    }

    /// The failed peer this rank heard of, if any.
    pub fn failed_peer(&self) -> Option<(usize, String)> {
        self.shared.failure.lock().ok().and_then(|f| f.peer.clone())
    }

    /// Runs one nonblocking collective started by `start` on the owned buffers and polls it to
    /// completion; `send` is copied in first, `recv_len` elements are received into `out`.
    fn collective(
        &self,
        op: &str,
        send: &[f32],
        recv_len: usize,
        start: impl FnOnce(&mut Io, &mut ffi::MPI_Request) -> c_int,
        out: &mut [f32],
    ) -> Result<()> {
        let mut io = self.begin(op)?;
        io.send.clear();
        io.send.extend_from_slice(send);
        recv_len_exact(&mut io.recv, recv_len);
        self.complete(op, &mut io, start)?;
        out.copy_from_slice(&io.recv[..out.len()]);
        Ok(())
    }

    /// Checks that collectives may still run and takes the buffers.
    fn begin(&self, op: &str) -> Result<std::sync::MutexGuard<'_, Io>> {
        self.check_usable(op)?;
        self.shared.io.lock().map_err(|_| poisoned())
    }

    /// Starts the collective on the prepared buffers and polls it to completion.
    fn complete(
        &self,
        op: &str,
        io: &mut Io,
        start: impl FnOnce(&mut Io, &mut ffi::MPI_Request) -> c_int,
    ) -> Result<()> {
        // SAFETY: MPI_REQUEST_NULL is an immutable handle exported by the MPI library.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        let rc = start(io, &mut req);
        if rc != 0 {
            return Err(TrainerError::Comm(format!("{op}: MPI error code {rc}")));
        }
        if let Err(e) = self.poll(op, &mut req) {
            // The request stays pending inside MPI: its buffers must outlive the process.
            std::mem::forget(std::mem::take(&mut io.send));
            std::mem::forget(std::mem::take(&mut io.recv));
            return Err(e);
        }
        Ok(())
    }

    fn check_usable(&self, op: &str) -> Result<()> {
        let f = self.shared.failure.lock().map_err(|_| poisoned())?;
        if let Some((r, m)) = &f.peer {
            return Err(peer_failed(*r, m));
        }
        if f.broken {
            return Err(TrainerError::Comm(format!(
                "{op}: an earlier collective was abandoned"
            )));
        }
        Ok(())
    }

    /// Polls `req` until it completes, a peer's failure notice arrives, or the deadline passes.
    fn poll(&self, op: &str, req: &mut ffi::MPI_Request) -> Result<()> {
        let start = Instant::now();
        let mut last_check = start;
        let mut spins = 0u32;
        loop {
            let mut flag: c_int = 0;
            // SAFETY: `req` is a live request handle; the status is ignored.
            unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            if flag != 0 {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                if let Some((r, m)) = self.probe_notice() {
                    self.mark_broken(Some((r, m.clone())));
                    return Err(peer_failed(r, &m));
                }
                if let Some((r, pid)) = self.dead_local_peer(&mut last_check) {
                    let m = format!("process {pid} on this host exited without notice");
                    self.mark_broken(Some((r, m.clone())));
                    return Err(peer_failed(r, &m));
                }
                if start.elapsed() > self.shared.timeout {
                    self.mark_broken(None);
                    return Err(TrainerError::Comm(format!(
                        "rank {} waited {}s in {op} for its peers (a peer is stuck, or died \
                         without notice); set RLPROF_MPI_TIMEOUT_S to wait longer{}",
                        self.shared.rank,
                        self.shared.timeout.as_secs(),
                        self.local_peer_states()
                    )));
                }
            }
            std::thread::yield_now();
        }
    }

    /// A same-host peer whose process is gone (checked at most every 100 ms).
    fn dead_local_peer(&self, last: &mut Instant) -> Option<(usize, u32)> {
        if last.elapsed() < Duration::from_millis(100) {
            return None;
        }
        *last = Instant::now();
        self.shared
            .local_peers
            .iter()
            .copied()
            .find(|&(_, pid)| !process_alive(pid))
    }

    /// "; same-host peers: rank 1 pid 123 state S" — what procfs says of each watched peer, for
    /// the deadline message (empty without same-host peers).
    fn local_peer_states(&self) -> String {
        let states: Vec<String> = self
            .shared
            .local_peers
            .iter()
            .map(|&(r, pid)| {
                let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| proc_state(&s))
                    .map_or_else(|| "unknown".to_string(), String::from);
                format!("rank {r} pid {pid} state {state}")
            })
            .collect();
        if states.is_empty() {
            String::new()
        } else {
            format!("; same-host peers: {}", states.join(", "))
        }
    }

    fn mark_broken(&self, peer: Option<(usize, String)>) {
        if let Ok(mut f) = self.shared.failure.lock() {
            f.broken = true;
            if f.peer.is_none() {
                f.peer = peer;
            }
        }
    }

    /// Receives one pending failure notice on the control communicator: (sender, message).
    fn probe_notice(&self) -> Option<(usize, String)> {
        let mut flag: c_int = 0;
        // SAFETY: MPI_Status is plain data filled by MPI_Iprobe/MPI_Recv.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: valid communicator handle, out-parameters owned here.
        unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                TAG_NOTICE,
                self.shared.ctrl.0,
                &mut flag,
                &mut status,
            )
        };
        if flag == 0 {
            return None;
        }
        let mut count: c_int = 0;
        // SAFETY: as above; the byte buffer has `count` bytes.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        let mut buf = vec![0u8; count.max(0) as usize];
        let source = status.MPI_SOURCE;
        // SAFETY: `buf` has room for the `count` bytes the probe announced from `source`.
        unsafe {
            ffi::MPI_Recv(
                buf.as_mut_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                source,
                TAG_NOTICE,
                self.shared.ctrl.0,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        Some((source as usize, String::from_utf8_lossy(&buf).into_owned()))
    }

    /// Sends `msg` to `dest` on the control communicator (nonblocking; the request is kept
    /// until it completes or the process ends).
    fn notify(&self, dest: usize, msg: &[u8]) -> ffi::MPI_Request {
        let buf: &'static [u8] = Box::leak(msg.to_vec().into_boxed_slice());
        // SAFETY: as in `collective`.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the buffer is leaked (lives for the process), the handles are valid.
        unsafe {
            ffi::MPI_Isend(
                buf.as_ptr().cast(),
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                TAG_NOTICE,
                self.shared.ctrl.0,
                &mut req,
            )
        };
        req
    }

    /// This rank failed: notify every peer and wait (bounded) until each has acknowledged (or
    /// reported its own failure), so that they close their collections before the job ends.
    fn announce_failure(&self, reason: &str) {
        let me = self.shared.rank;
        let msg = format!("rank {me}: {reason}");
        let mut reqs: Vec<_> = (0..self.shared.size)
            .filter(|&r| r != me)
            .map(|r| self.notify(r, msg.as_bytes()))
            .collect();
        let mut heard = vec![false; self.shared.size];
        heard[me] = true;
        let t0 = Instant::now();
        while heard.iter().any(|h| !h) && t0.elapsed() < ACK_WAIT {
            while let Some((r, _)) = self.probe_notice() {
                heard[r] = true;
            }
            for req in &mut reqs {
                let mut flag: c_int = 0;
                // SAFETY: live (or already null) request handle.
                unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// After a peer's failure: tells the failed rank that this one has stopped and written its
    /// output (collections closed, error printed), so the failed rank may end the job. Call it
    /// last, right before exiting; the failed rank waits for it at most 30 s. No-op otherwise.
    pub fn acknowledge_failure(&self) {
        let failed = match self.shared.failure.lock() {
            Ok(f) => f.peer.as_ref().map(|p| p.0),
            Err(_) => None,
        };
        if let Some(r) = failed {
            self.acknowledge(r);
        }
    }

    fn acknowledge(&self, failed: usize) {
        let mut req = self.notify(failed, b"ack");
        let t0 = Instant::now();
        let mut flag: c_int = 0;
        while flag == 0 && t0.elapsed() < ACK_WAIT {
            // SAFETY: live request handle.
            unsafe { ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Exchanges (host hash, pid) and keeps the peers that run on this host.
fn local_peers(world: &::mpi::topology::SimpleCommunicator, me: usize) -> Vec<(usize, u32)> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ::mpi::environment::processor_name()
        .unwrap_or_default()
        .hash(&mut h);
    let mine = [h.finish(), u64::from(std::process::id())];
    let mut all = vec![0u64; 2 * world.size() as usize];
    world.all_gather_into(&mine[..], &mut all[..]);
    all.chunks(2)
        .enumerate()
        .filter(|&(r, c)| r != me && c[0] == mine[0])
        .map(|(r, c)| (r, c[1] as u32))
        .collect()
}

/// Whether process `pid` still runs. An exited process that its parent has not reaped yet is a
/// zombie: `kill(pid, 0)` still succeeds on it (MPICH's hydra proxy, without auto-cleanup, may
/// leave it unreaped for the whole job), so the state letter in `/proc/<pid>/stat` decides where
/// procfs exists.
pub(crate) fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(proc_state(&stat), Some('Z' | 'X' | 'x')),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(_) => {
            // SAFETY: signal 0 only checks that the process exists.
            let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
            rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
        }
    }
}

/// The state letter of a `/proc/<pid>/stat` line: the field after the `(comm)`, which may itself
/// hold spaces and parentheses, hence the last `)`.
fn proc_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Sizes a receive buffer to `n` without rewriting the part MPI overwrites anyway.
fn recv_len_exact(v: &mut Vec<f32>, n: usize) {
    v.truncate(n);
    v.resize(n, 0.0);
}

fn timeout_from_env() -> Duration {
    std::env::var("RLPROF_MPI_TIMEOUT_S")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .map_or(Duration::from_secs(600), Duration::from_secs_f64)
}

fn peer_failed(rank: usize, message: &str) -> TrainerError {
    let detail = message
        .strip_prefix(&format!("rank {rank}: "))
        .unwrap_or(message);
    TrainerError::Comm(format!("rank {rank} failed: {detail}"))
}

fn poisoned() -> TrainerError {
    TrainerError::Comm("a thread panicked inside an MPI collective".into())
}

fn shape(op: &str, detail: String) -> TrainerError {
    TrainerError::Comm(format!("{op}: {detail}"))
}

impl Communicator for MpiComm {
    fn rank(&self) -> usize {
        self.shared.rank
    }

    fn world_size(&self) -> usize {
        self.shared.size
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) -> Result<()> {
        let (n, comm) = (buf.len(), self.shared.world.0);
        let mut io = self.begin("all_reduce")?;
        io.send.clear();
        io.send.extend_from_slice(buf);
        recv_len_exact(&mut io.recv, n);
        self.complete("all_reduce", &mut io, |io, req| {
            // SAFETY: both buffers hold `n` f32s and are owned by the communicator until the
            // request completes (or are leaked when it is abandoned).
            unsafe {
                ffi::MPI_Iallreduce(
                    io.send.as_ptr().cast(),
                    io.recv.as_mut_ptr().cast(),
                    n as c_int,
                    ffi::RSMPI_FLOAT,
                    ffi::RSMPI_SUM,
                    comm,
                    req,
                )
            }
        })?;
        buf.copy_from_slice(&io.recv);
        Ok(())
    }

    fn all_gather(&self, shard: &[f32], out: &mut [f32]) -> Result<()> {
        let (n, comm) = (shard.len(), self.shared.world.0);
        if out.len() != n * self.shared.size {
            return Err(shape(
                "all_gather",
                format!("output {} != {} ranks x {n}", out.len(), self.shared.size),
            ));
        }
        self.collective(
            "all_gather",
            shard,
            out.len(),
            |io, req| {
                // SAFETY: send holds `n`, recv `world * n` f32s, owned as in all_reduce.
                unsafe {
                    ffi::MPI_Iallgather(
                        io.send.as_ptr().cast(),
                        n as c_int,
                        ffi::RSMPI_FLOAT,
                        io.recv.as_mut_ptr().cast(),
                        n as c_int,
                        ffi::RSMPI_FLOAT,
                        comm,
                        req,
                    )
                }
            },
            out,
        )
    }

    fn reduce_scatter_sum(&self, input: &[f32], out: &mut [f32]) -> Result<()> {
        let (n, comm) = (out.len(), self.shared.world.0);
        if input.len() != n * self.shared.size {
            return Err(shape(
                "reduce_scatter",
                format!("input {} != {} ranks x {n}", input.len(), self.shared.size),
            ));
        }
        self.collective(
            "reduce_scatter",
            input,
            n,
            |io, req| {
                // SAFETY: send holds `world * n`, recv `n` f32s, owned as in all_reduce.
                unsafe {
                    ffi::MPI_Ireduce_scatter_block(
                        io.send.as_ptr().cast(),
                        io.recv.as_mut_ptr().cast(),
                        n as c_int,
                        ffi::RSMPI_FLOAT,
                        ffi::RSMPI_SUM,
                        comm,
                        req,
                    )
                }
            },
            out,
        )
    }

    fn broadcast(&self, buf: &mut [f32], root: usize) -> Result<()> {
        let (n, comm) = (buf.len(), self.shared.world.0);
        if root >= self.shared.size {
            return Err(shape("broadcast", format!("root {root} is not a rank")));
        }
        let mut io = self.begin("broadcast")?;
        io.recv.clear();
        io.recv.extend_from_slice(buf);
        self.complete("broadcast", &mut io, |io, req| {
            // SAFETY: recv holds `n` f32s, owned as in all_reduce.
            unsafe {
                ffi::MPI_Ibcast(
                    io.recv.as_mut_ptr().cast(),
                    n as c_int,
                    ffi::RSMPI_FLOAT,
                    root as c_int,
                    comm,
                    req,
                )
            }
        })?;
        buf.copy_from_slice(&io.recv);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let comm = self.shared.world.0;
        self.collective(
            "barrier",
            &[],
            0,
            // SAFETY: valid communicator, request owned by `collective`.
            |_, req| unsafe { ffi::MPI_Ibarrier(comm, req) },
            &mut [],
        )
    }

    fn abort_with(&self, reason: &str) {
        let (peer, first) = match self.shared.failure.lock() {
            Ok(mut f) => {
                let first = !f.notified;
                f.notified = true;
                (f.peer.clone(), first)
            }
            Err(_) => return,
        };
        if !first {
            return;
        }
        match peer {
            // Acknowledged by `acknowledge_failure`, once this process has finished its output.
            Some(_) => {}
            None => self.announce_failure(reason),
        }
    }

    fn abort(&self) {
        self.abort_with("stopped")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_letter_follows_the_last_parenthesis() {
        assert_eq!(proc_state("42 (a) b) Z 1 2"), Some('Z'));
        assert_eq!(proc_state("7 (rlprof) S 1"), Some('S'));
        assert_eq!(proc_state("garbage"), None);
    }

    #[test]
    fn an_unreaped_exited_child_counts_as_dead() {
        let mut running = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(process_alive(running.id()));
        let mut quick = std::process::Command::new("true").spawn().unwrap();
        let pid = quick.id();
        // Not waited for: the child stays a zombie, which `kill(pid, 0)` would call alive.
        let t0 = Instant::now();
        while process_alive(pid) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "zombie {pid} seen alive"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: signal 0 only checks that the process exists.
        let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
        assert_eq!(rc, 0, "still a zombie");
        quick.wait().unwrap();
        assert!(!process_alive(pid));
        running.kill().unwrap();
        running.wait().unwrap();
    }
}
