//! Unix signals as streams of deliveries, with tokio's shapes:
//! [`signal`], [`Signal`], [`SignalKind`].
//!
//! # Example
//! ```
//! use fairlane::signal::unix::{signal, SignalKind};
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! rt.block_on(async {
//!     let mut usr2 = signal(SignalKind::user_defined2())?;
//!     // SAFETY: no preconditions; SIGUSR2 is handled now.
//!     unsafe { libc::raise(libc::SIGUSR2) };
//!     assert_eq!(usr2.recv().await, Some(()));
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::task::{Context, Poll};

use super::Listener;

/// Which signal to listen for.
///
/// # Example
/// ```
/// use fairlane::signal::unix::SignalKind;
/// assert_eq!(SignalKind::terminate().as_raw_value(), libc::SIGTERM);
/// assert_eq!(SignalKind::from_raw(libc::SIGUSR1), SignalKind::user_defined1());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignalKind(libc::c_int);

impl SignalKind {
    /// A signal by number (the `SIG*` constants of `libc`).
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::from_raw(libc::SIGHUP), SignalKind::hangup());
    /// ```
    pub const fn from_raw(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal's number.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::interrupt().as_raw_value(), libc::SIGINT);
    /// ```
    pub const fn as_raw_value(&self) -> libc::c_int {
        self.0
    }

    /// SIGALRM.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::alarm().as_raw_value(), libc::SIGALRM);
    /// ```
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }

    /// SIGCHLD: a child process changed state.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::child().as_raw_value(), libc::SIGCHLD);
    /// ```
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }

    /// SIGHUP: the terminal went away; daemons often reload on it.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::hangup().as_raw_value(), libc::SIGHUP);
    /// ```
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }

    /// SIGINT: Ctrl-C.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::interrupt().as_raw_value(), libc::SIGINT);
    /// ```
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }

    /// SIGIO.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::io().as_raw_value(), libc::SIGIO);
    /// ```
    pub const fn io() -> SignalKind {
        SignalKind(libc::SIGIO)
    }

    /// SIGPIPE (fairlane's sockets never raise it: they send with
    /// `MSG_NOSIGNAL`).
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::pipe().as_raw_value(), libc::SIGPIPE);
    /// ```
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }

    /// SIGQUIT.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::quit().as_raw_value(), libc::SIGQUIT);
    /// ```
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }

    /// SIGTERM: the polite request to stop that service managers send.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::terminate().as_raw_value(), libc::SIGTERM);
    /// ```
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }

    /// SIGUSR1.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::user_defined1().as_raw_value(), libc::SIGUSR1);
    /// ```
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }

    /// SIGUSR2.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::user_defined2().as_raw_value(), libc::SIGUSR2);
    /// ```
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }

    /// SIGWINCH: the terminal's size changed.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::window_change().as_raw_value(), libc::SIGWINCH);
    /// ```
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }
}

impl From<libc::c_int> for SignalKind {
    fn from(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }
}

/// Deliveries of one signal, from the moment it was made: each
/// [`recv`](Signal::recv) returns once the signal arrived since the last
/// one returned (several deliveries in between count as one).
///
/// # Example
/// ```
/// use fairlane::signal::unix::{signal, SignalKind};
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let mut usr1 = signal(SignalKind::user_defined1())?;
/// // SAFETY: no preconditions; SIGUSR1 is handled now.
/// unsafe { libc::raise(libc::SIGUSR1) };
/// usr1.recv().await;
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Signal {
    listener: Listener,
}

/// Listens for `kind`. Installs fairlane's handler for it the first time
/// (for the rest of the process: the signal's default effect, such as
/// ending the process, no longer happens).
///
/// # Errors
/// `InvalidInput` for a number that is not a signal, or one that cannot be
/// handled (SIGKILL, SIGSTOP, SIGILL, SIGFPE, SIGSEGV); the operating
/// system's error if the handler or the signal thread cannot be set up.
///
/// # Example
/// ```
/// use fairlane::signal::unix::{signal, SignalKind};
/// let err = signal(SignalKind::from_raw(libc::SIGKILL)).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// ```
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    Ok(Signal {
        listener: Listener::new(kind.0)?,
    })
}

impl Signal {
    /// Waits for the next delivery. Always `Some(())`: the stream never
    /// ends (the `Option` is tokio's shape).
    ///
    /// Cancel-safe: a dropped `recv` loses no delivery.
    ///
    /// # Example
    /// ```
    /// use fairlane::signal::unix::{signal, SignalKind};
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     let mut hup = signal(SignalKind::hangup())?;
    ///     // SAFETY: no preconditions; SIGHUP is handled now.
    ///     unsafe { libc::raise(libc::SIGHUP) };
    ///     assert_eq!(hup.recv().await, Some(()));
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn recv(&mut self) -> Option<()> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next delivery; see [`Signal::recv`].
    ///
    /// # Example
    /// ```
    /// use std::task::{Context, Poll, Waker};
    /// use fairlane::signal::unix::{signal, SignalKind};
    /// let mut sig = signal(SignalKind::user_defined2())?;
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(sig.poll_recv(&mut cx).is_pending());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        self.listener.poll_recv(cx).map(Some)
    }
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signal").finish_non_exhaustive()
    }
}
