//! The reaper of dropped children: a [`Child`](super::Child) dropped
//! before its process was reaped hands the process here, so that it never
//! stays a zombie.
//!
//! One thread per program (`fairlane-reaper`), started by the first
//! orphan, sleeps in `poll` on the orphans' pidfds and an eventfd that
//! [`adopt`] signals. Each round, under the orphans' lock, it reaps every
//! orphan that exited (`waitpid` with `WNOHANG`) and collects the pidfds
//! of the others; then it polls without the lock. An orphan adopted after
//! the collection signalled the eventfd, which is read only after the
//! poll returns and before the next collection: it ends the poll at once,
//! or its orphan is in the next collection, so none is missed. The pidfds
//! stay open while polled: only this thread removes orphans. Without
//! pidfds (a kernel before Linux 5.3) it polls every
//! [`NO_PIDFD_PERIOD_MS`] while such orphans are left; with none, it sleeps
//! with no timeout and uses no CPU.
//!
//! Only this thread reaps an orphan (its `Child` is gone, and nothing else
//! of fairlane's waits for it), so its pid cannot be reused before it is
//! reaped here. Something else in the program that reaps every child
//! (`waitpid(-1)`, `SIGCHLD` set to `SIG_IGN`) takes it first: `waitpid`
//! then fails with `ECHILD` and the orphan is forgotten.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};

use crate::io::driver::{eventfd, eventfd_signal};

/// How often orphans without a pidfd are looked at.
const NO_PIDFD_PERIOD_MS: libc::c_int = 100;

struct Orphan {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
}

struct Reaper {
    orphans: Mutex<Vec<Orphan>>,
    wake: OwnedFd,
}

/// The reaper, started on first use; `None` if it could not start.
fn reaper() -> Option<&'static Arc<Reaper>> {
    static REAPER: OnceLock<Option<Arc<Reaper>>> = OnceLock::new();
    REAPER
        .get_or_init(|| match start() {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(
                    "fairlane could not start its child reaper ({e}): \
                     dropped children stay zombies until the program exits"
                );
                None
            }
        })
        .as_ref()
}

fn start() -> io::Result<Arc<Reaper>> {
    let reaper = Arc::new(Reaper {
        orphans: Mutex::new(Vec::new()),
        wake: eventfd()?,
    });
    let r = reaper.clone();
    std::thread::Builder::new()
        .name("fairlane-reaper".to_string())
        .spawn(move || r.run())?;
    Ok(reaper)
}

/// Hands process `pid` (a child of this program that nobody else will
/// wait for) to the reaper, with its pidfd if it has one.
pub(crate) fn adopt(pid: u32, pidfd: Option<OwnedFd>) {
    let pid = pid as libc::pid_t;
    let orphan = Orphan { pid, pidfd };
    // Exited already: reaped here, no thread needed.
    if reap(&orphan) {
        return;
    }
    let Some(reaper) = reaper() else { return };
    reaper
        .orphans
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(orphan);
    eventfd_signal(reaper.wake.as_raw_fd());
}

/// Reaps `orphan` if it exited; true if it is gone (reaped here, or by
/// someone else: `ECHILD`).
fn reap(orphan: &Orphan) -> bool {
    let mut status = 0;
    loop {
        // SAFETY: writes one int into the live local.
        let r = unsafe { libc::waitpid(orphan.pid, &mut status, libc::WNOHANG) };
        if r == orphan.pid {
            return true;
        }
        if r == 0 {
            return false;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            tracing::debug!(pid = orphan.pid, "reaping a dropped child: {e}");
            return true;
        }
    }
}

impl Reaper {
    fn run(&self) {
        let mut fds = Vec::new();
        loop {
            fds.clear();
            fds.push(libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            let mut timeout = -1;
            {
                let mut orphans = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
                orphans.retain(|o| !reap(o));
                for o in orphans.iter() {
                    match &o.pidfd {
                        Some(fd) => fds.push(libc::pollfd {
                            fd: fd.as_raw_fd(),
                            events: libc::POLLIN,
                            revents: 0,
                        }),
                        None => timeout = NO_PIDFD_PERIOD_MS,
                    }
                }
            }
            // SAFETY: `fds` is a live array of `fds.len()` pollfds; the
            // descriptors stay open during the call (only this thread
            // removes orphans). An error (EINTR) just starts a new round.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if fds[0].revents != 0 {
                let mut buf = 0u64;
                // SAFETY: reads 8 bytes into a live local; the eventfd is
                // non-blocking, so an empty counter just fails.
                unsafe { libc::read(self.wake.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
            }
        }
    }
}
