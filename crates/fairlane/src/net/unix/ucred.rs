//! [`UCred`]: the credentials of a Unix-domain stream's peer
//! ([`UnixStream::peer_cred`]).

use std::io;
use std::os::fd::AsRawFd;

use super::UnixStream;

/// The credentials of the process at the other end of a [`UnixStream`],
/// as the kernel recorded them when the connection was made
/// (`SO_PEERCRED`), as tokio's type of that name.
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let (a, _b) = fairlane::net::UnixStream::pair()?;
/// let cred = a.peer_cred()?;
/// assert_eq!(cred.uid(), unsafe { libc::getuid() });
/// assert_eq!(cred.pid(), Some(std::process::id() as libc::pid_t));
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UCred {
    pid: Option<libc::pid_t>,
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl UCred {
    /// The peer's user id.
    ///
    /// # Example
    /// See [`UCred`].
    /// ```
    /// fn root(c: fairlane::net::unix::UCred) -> bool { c.uid() == 0 }
    /// ```
    pub fn uid(&self) -> libc::uid_t {
        self.uid
    }

    /// The peer's group id.
    ///
    /// # Example
    /// ```
    /// fn gid(c: fairlane::net::unix::UCred) -> libc::gid_t { c.gid() }
    /// ```
    pub fn gid(&self) -> libc::gid_t {
        self.gid
    }

    /// The peer's process id (`None` where the kernel gave none).
    ///
    /// # Example
    /// ```
    /// fn pid(c: fairlane::net::unix::UCred) -> Option<libc::pid_t> { c.pid() }
    /// ```
    pub fn pid(&self) -> Option<libc::pid_t> {
        self.pid
    }
}

impl UnixStream {
    /// The credentials of the peer process, as tokio's method of that
    /// name (see [`UCred`]).
    ///
    /// # Errors
    /// The operating system's (`getsockopt(SO_PEERCRED)`).
    ///
    /// # Example
    /// See [`UCred`].
    /// ```
    /// fn uid(s: &fairlane::net::UnixStream) -> std::io::Result<u32> { Ok(s.peer_cred()?.uid()) }
    /// ```
    pub fn peer_cred(&self) -> io::Result<UCred> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` and `len` are live locals of the sizes passed; the
        // descriptor is this stream's, open while `self` is borrowed.
        let r = unsafe {
            libc::getsockopt(
                self.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(UCred {
            pid: (cred.pid != 0).then_some(cred.pid),
            uid: cred.uid,
            gid: cred.gid,
        })
    }
}
