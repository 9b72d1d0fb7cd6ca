//! The CPU time a server spends, and keeping it apart from its load
//! generator: shared by the server workloads (echo, memcached).
//!
//! A server in this process is measured by the process's CPU clock (every
//! thread, those that ended inside the window included, io_uring's kernel
//! workers too: they are threads of the process) minus the load
//! generator's thread clock; a server in a process of its own by that
//! process's clock.
//!
//! Where the machine has more cores than the server has processors, the
//! server's threads are pinned to the first `processors` cores and the load
//! generator to the next one (`sched_setaffinity`), so that the two never
//! take turns on one core; otherwise nothing is pinned.

use std::os::unix::thread::JoinHandleExt;
use std::time::Duration;

/// Where the server runs, for its CPU time.
pub enum ServerProcess {
    /// In this process: everything but the load generator's thread.
    This,
    /// A process of its own.
    Other(u32),
}

/// The core the load generator is pinned to, if the server's processors
/// leave one free.
pub fn client_core(processors: usize) -> Option<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores > processors).then_some(processors)
}

/// The server's CPU clock and the load generator's.
pub struct ServerCpu {
    server: libc::clockid_t,
    client: libc::clockid_t,
    /// The server runs in this process: the client's time is subtracted.
    here: bool,
}

impl ServerCpu {
    pub fn new<T>(process: &ServerProcess, client: &std::thread::JoinHandle<T>) -> ServerCpu {
        ServerCpu {
            server: process_clock(process),
            client: thread_clock(client),
            here: matches!(process, ServerProcess::This),
        }
    }

    /// Both clocks now, the server's first (the start of a window).
    pub fn read(&self) -> (Duration, Duration) {
        (read_clock(self.server), read_clock(self.client))
    }

    /// The server's CPU time since `start` (a [`ServerCpu::read`]).
    ///
    /// The two clocks are read in the opposite order to `read`'s, so the
    /// load generator's time between two reads is never subtracted without
    /// having been counted: a preempted reader can only overstate the
    /// server's time by that gap, never cancel the server's time out.
    pub fn since(&self, (server0, client0): (Duration, Duration)) -> Duration {
        let client1 = read_clock(self.client);
        let server1 = read_clock(self.server);
        let cpu = server1.saturating_sub(server0);
        if self.here {
            cpu.saturating_sub(client1.saturating_sub(client0))
        } else {
            cpu
        }
    }
}

/// The CPU clock of `thread` (its own CPU time).
fn thread_clock<T>(thread: &std::thread::JoinHandle<T>) -> libc::clockid_t {
    let mut clock = 0;
    // SAFETY: the thread is joinable (not joined yet), so its pthread_t is
    // valid; the call writes one clockid into the live local.
    let r = unsafe { libc::pthread_getcpuclockid(thread.as_pthread_t(), &mut clock) };
    assert_eq!(r, 0, "pthread_getcpuclockid: {r}");
    clock
}

/// The CPU clock of the server's process (all its threads, those that
/// ended included).
fn process_clock(process: &ServerProcess) -> libc::clockid_t {
    match process {
        ServerProcess::This => libc::CLOCK_PROCESS_CPUTIME_ID,
        &ServerProcess::Other(pid) => {
            let mut clock = 0;
            // SAFETY: writes one clockid into the live local.
            let r = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
            assert_eq!(r, 0, "clock_getcpuclockid({pid}): {r}");
            clock
        }
    }
}

fn read_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into the live local.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Pins thread `tid` (0: the calling one) to `cores`.
pub fn pin_thread(tid: libc::pid_t, cores: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes a bit of
    // the live local; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        // A failure (a thread that just ended) leaves it unpinned.
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Pins every thread of the server's process to `cores`; in this process,
/// all but the load generator's, named `load_thread` (it pins itself).
pub fn pin_server(process: &ServerProcess, cores: &[usize], load_thread: &str) {
    let pid = match process {
        ServerProcess::This => std::process::id(),
        &ServerProcess::Other(pid) => pid,
    };
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if matches!(process, ServerProcess::This) && comm.trim_end() == load_thread {
            continue;
        }
        pin_thread(tid, cores);
    }
}
