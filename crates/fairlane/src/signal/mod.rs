//! Asynchronous signal handling, with tokio's shapes: [`ctrl_c`] and the
//! Unix signals of [`unix`].
//!
//! The first listener of a signal installs a handler for it (through
//! `signal-hook-registry`, which keeps any handler installed before), and
//! the handler stays for the life of the process: a signal that has been
//! listened for once no longer has its default effect (SIGINT no longer
//! ends the process), as with tokio.
//!
//! How a delivery reaches a task: the handler, which may only do what is
//! async-signal-safe, marks the signal pending and writes a byte to a pipe.
//! One thread of the process (`fairlane-signal`, started with the first
//! listener) blocks reading that pipe; for each pending signal it advances
//! the signal's delivery count and wakes every task waiting for it. A
//! listener returns once the count has moved past the last one it saw, so
//! deliveries between two `recv` calls count as one (as tokio's do), and
//! none is missed: the pending mark is set before the byte is written, and
//! the thread clears the mark before it reads the count's waiters.
//!
//! A delivery that finds no listener (after the handler was installed: one
//! listened and was dropped) is kept for the next listener made, whose
//! first `recv` returns at once, as tokio's does when its driver had not
//! yet passed the delivery on.
//!
//! Listening needs no runtime: the handler and the signal thread are the
//! process's, so a `Signal` made outside any runtime works, and its `recv`
//! can be awaited by any executor (tokio's refuses outside its runtime).
//!
//! The signal thread is the same for every runtime and both I/O backends.
//!
//! # Example
//! ```no_run
//! #[fairlane::main]
//! async fn main() -> std::io::Result<()> {
//!     let server = fairlane::spawn(async { /* serve */ });
//!     fairlane::signal::ctrl_c().await?;
//!     server.abort();
//!     Ok(())
//! }
//! ```

pub mod unix;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};

/// Waits for the next SIGINT (Ctrl-C in a terminal).
///
/// The first call installs the handler, after which SIGINT no longer ends
/// the process; deliveries before that are not seen. The handler is
/// installed by the call itself, before the future is first polled, so a
/// SIGINT sent right after `ctrl_c()` returned (from another task, which
/// may run at once on another processor) is seen by the future.
///
/// # Errors
/// If the handler cannot be installed or the signal thread cannot start.
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let ctrl_c = fairlane::signal::ctrl_c();
/// // The call installed the handler: the signal is seen though the future
/// // has not been polled yet.
/// // SAFETY: raise has no preconditions; SIGINT is handled now.
/// unsafe { libc::raise(libc::SIGINT) };
/// ctrl_c.await?;
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn ctrl_c() -> impl std::future::Future<Output = io::Result<()>> + Send + 'static {
    let listener = unix::signal(unix::SignalKind::interrupt());
    async move {
        listener?.recv().await;
        Ok(())
    }
}

/// Signal numbers go up to `SIGRTMAX`, at most 64 on Linux.
const SIGNALS: usize = 65;

/// One signal's state, shared by its handler, the signal thread and its
/// listeners.
struct Slot {
    /// Set by the handler, cleared by the signal thread.
    pending: AtomicBool,
    /// Deliveries the signal thread has passed on. Moved under `waiting`'s
    /// lock (and read without it by listeners looking for a delivery).
    count: AtomicU64,
    /// Tasks waiting for `count` to move, and who listens.
    waiting: Mutex<Waiting>,
    /// The handler is installed.
    installed: Mutex<bool>,
}

struct Globals {
    slots: [Slot; SIGNALS],
    /// The pipe's write end, for the handler (which cannot take a lock or
    /// look at a `OnceLock`'s state); -1 until the thread runs.
    pipe_w: AtomicI32,
    /// Serialises starting the thread.
    start: Mutex<bool>,
}

fn globals() -> &'static Globals {
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    GLOBALS.get_or_init(|| Globals {
        slots: std::array::from_fn(|_| Slot {
            pending: AtomicBool::new(false),
            count: AtomicU64::new(0),
            waiting: Mutex::new(Waiting::default()),
            installed: Mutex::new(false),
        }),
        pipe_w: AtomicI32::new(-1),
        start: Mutex::new(false),
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the signal thread once; its pipe's write end is in `pipe_w`.
fn start_thread(g: &'static Globals) -> io::Result<()> {
    let mut started = lock(&g.start);
    if *started {
        return Ok(());
    }
    let mut fds = [0 as RawFd; 2];
    // SAFETY: writes two descriptors into the live array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: new descriptors nobody else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The thread blocks on its read: only the write end stays non-blocking
    // (a full pipe already holds a wake-up, so the handler may skip its
    // byte).
    // SAFETY: fcntl on our own descriptor, no pointers.
    unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETFL, 0) };
    std::thread::Builder::new()
        .name("fairlane-signal".into())
        .spawn(move || dispatch(g, read))?;
    // The write end lives as long as the process (the handler may run at
    // any time): it is never closed.
    g.pipe_w.store(write.as_raw_fd(), Ordering::Release);
    std::mem::forget(write);
    *started = true;
    Ok(())
}

/// The signal thread: passes each delivery on to the listeners.
fn dispatch(g: &'static Globals, read: OwnedFd) {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reads into the live buffer.
        let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            tracing::error!(error = %io::Error::last_os_error(), "fairlane's signal thread cannot read its pipe");
            return;
        }
        for slot in &g.slots {
            // Acquire pairs with the handler's Release: the mark is seen
            // once its byte is. Cleared before the waiters are taken, so a
            // delivery after this point marks it again and writes a byte.
            if slot.pending.swap(false, Ordering::Acquire) {
                let waiters = {
                    let mut waiting = lock(&slot.waiting);
                    slot.count.fetch_add(1, Ordering::Release);
                    waiting.unheard = waiting.listeners == 0;
                    std::mem::take(&mut waiting.wakers)
                };
                waiters.into_iter().for_each(Waker::wake);
            }
        }
    }
}

/// The handler: async-signal-safe (atomics and `write`).
fn on_signal(signum: usize) {
    let g = globals();
    g.slots[signum].pending.store(true, Ordering::Release);
    let fd = g.pipe_w.load(Ordering::Acquire);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: `write` is async-signal-safe; the descriptor is never
        // closed. A full pipe (EAGAIN) already holds a wake-up.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Makes sure `signum` has fairlane's handler and the thread runs; returns
/// its slot.
fn listen(signum: i32) -> io::Result<&'static Slot> {
    let index = usize::try_from(signum)
        .ok()
        .filter(|&i| (1..SIGNALS).contains(&i) && signum <= libc::SIGRTMAX())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{signum} is not a signal number (1 to {})",
                    libc::SIGRTMAX()
                ),
            )
        })?;
    if signal_hook_registry::FORBIDDEN.contains(&signum) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal {signum} cannot be handled (SIGKILL, SIGSTOP, SIGILL, SIGFPE and SIGSEGV cannot)"),
        ));
    }
    let g = globals();
    start_thread(g)?;
    let slot = &g.slots[index];
    let mut installed = lock(&slot.installed);
    if !*installed {
        // SAFETY: `on_signal` is async-signal-safe: it touches atomics of
        // a static that is initialised (above) before the handler can run,
        // and calls `write`.
        unsafe { signal_hook_registry::register(signum, move || on_signal(index)) }?;
        *installed = true;
    }
    Ok(slot)
}

/// A signal's waiting tasks and listeners, under its slot's lock.
#[derive(Default)]
struct Waiting {
    wakers: Vec<Waker>,
    /// Listeners that exist.
    listeners: usize,
    /// The last delivery found no listener: the next listener made takes it
    /// as not yet seen.
    unheard: bool,
}

/// A listener's view of one signal: the delivery count it has seen.
struct Listener {
    slot: &'static Slot,
    seen: u64,
}

impl Listener {
    fn new(signum: i32) -> io::Result<Listener> {
        let slot = listen(signum)?;
        let mut waiting = lock(&slot.waiting);
        waiting.listeners += 1;
        let count = slot.count.load(Ordering::Acquire);
        let seen = count - u64::from(std::mem::take(&mut waiting.unheard));
        Ok(Listener { slot, seen })
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.take() {
            return Poll::Ready(());
        }
        {
            let waiters = &mut lock(&self.slot.waiting).wakers;
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
        }
        // A delivery between the first look and the registration moved the
        // count before the thread took the waiters (which it does under the
        // lock above, after moving the count): look again.
        if self.take() {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn take(&mut self) -> bool {
        let now = self.slot.count.load(Ordering::Acquire);
        if now != self.seen {
            self.seen = now;
            true
        } else {
            false
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        lock(&self.slot.waiting).listeners -= 1;
    }
}
