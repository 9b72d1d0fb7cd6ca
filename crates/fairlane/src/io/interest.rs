//! [`Interest`] (what a wait is for) and [`Ready`] (what the descriptor
//! reported), with tokio's names and shapes.
//!
//! Both backends ask the descriptor itself with `poll` events: io_uring
//! with a one-shot `POLL_ADD`, whose result is the reported event mask;
//! the fallback backend with a `poll` that does not wait, after each
//! readiness event of the descriptor's epoll registration. So a [`Ready`]
//! is the kernel's answer to the same question on both backends.

use std::fmt;
use std::ops;

const READABLE: u8 = 1;
const WRITABLE: u8 = 1 << 1;
const PRIORITY: u8 = 1 << 2;
const ERROR: u8 = 1 << 3;

/// What a readiness wait waits for: any one of its kinds ends the wait.
/// Never empty.
///
/// Provided: [`READABLE`](Self::READABLE), [`WRITABLE`](Self::WRITABLE),
/// [`PRIORITY`](Self::PRIORITY) (urgent data, `POLLPRI`) and
/// [`ERROR`](Self::ERROR) (an error only), which both backends honour.
/// Not provided: tokio's `AIO` and `LIO` (FreeBSD only).
///
/// # Example
/// ```
/// use fairlane::io::Interest;
/// let both = Interest::READABLE | Interest::WRITABLE;
/// assert!(both.is_readable() && both.is_writable());
/// assert!(!both.is_priority());
/// assert_eq!(both.remove(Interest::WRITABLE), Some(Interest::READABLE));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(u8);

impl Interest {
    /// Data to read, the end of the input, an error or a hang-up: a read
    /// would not block.
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Interest::READABLE.is_readable());
    /// ```
    pub const READABLE: Interest = Interest(READABLE);

    /// Room to write, an error or a hang-up: a write would not block.
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Interest::WRITABLE.is_writable());
    /// ```
    pub const WRITABLE: Interest = Interest(WRITABLE);

    /// Urgent data (`POLLPRI`): TCP out-of-band data, a `/proc` file or a
    /// cgroup event file that changed, a terminal state change.
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Interest::PRIORITY.is_priority());
    /// ```
    pub const PRIORITY: Interest = Interest(PRIORITY);

    /// Only an error (or a hang-up), which the kernel reports to every
    /// waiter whatever it waits for.
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Interest::ERROR.is_error());
    /// ```
    pub const ERROR: Interest = Interest(ERROR);

    /// Whether this includes [`READABLE`](Self::READABLE).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// assert!((Interest::READABLE | Interest::ERROR).is_readable());
    /// assert!(!Interest::WRITABLE.is_readable());
    /// ```
    pub const fn is_readable(self) -> bool {
        self.0 & READABLE != 0
    }

    /// Whether this includes [`WRITABLE`](Self::WRITABLE).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// assert!(Interest::WRITABLE.is_writable());
    /// assert!(!Interest::READABLE.is_writable());
    /// ```
    pub const fn is_writable(self) -> bool {
        self.0 & WRITABLE != 0
    }

    /// Whether this includes [`PRIORITY`](Self::PRIORITY).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// assert!(Interest::PRIORITY.is_priority());
    /// assert!(!Interest::READABLE.is_priority());
    /// ```
    pub const fn is_priority(self) -> bool {
        self.0 & PRIORITY != 0
    }

    /// Whether this includes [`ERROR`](Self::ERROR).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// assert!(Interest::ERROR.is_error());
    /// assert!(!Interest::READABLE.is_error());
    /// ```
    pub const fn is_error(self) -> bool {
        self.0 & ERROR != 0
    }

    /// Both interests (usable in `const` contexts, unlike `|`).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// const BOTH: Interest = Interest::READABLE.add(Interest::WRITABLE);
    /// assert_eq!(BOTH, Interest::READABLE | Interest::WRITABLE);
    /// ```
    #[must_use]
    pub const fn add(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }

    /// This interest without `other`, or `None` if nothing would be left
    /// (an interest is never empty).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// let both = Interest::READABLE | Interest::WRITABLE;
    /// assert_eq!(both.remove(Interest::READABLE), Some(Interest::WRITABLE));
    /// assert_eq!(Interest::READABLE.remove(Interest::READABLE), None);
    /// ```
    #[must_use]
    pub fn remove(self, other: Interest) -> Option<Interest> {
        let left = self.0 & !other.0;
        (left != 0).then_some(Interest(left))
    }

    /// Whether every kind in `other` is in `self`.
    pub(crate) fn contains(self, other: Interest) -> bool {
        self.0 & other.0 == other.0
    }

    /// The `poll` events this interest asks the kernel for (errors and
    /// hang-ups are always reported). Readable asks for `POLLRDHUP` too, so
    /// that a peer's half-close shows as [`Ready::is_read_closed`].
    pub(crate) fn poll_events(self) -> libc::c_short {
        let mut events = 0;
        if self.is_readable() {
            events |= libc::POLLIN | libc::POLLRDHUP;
        }
        if self.is_writable() {
            events |= libc::POLLOUT;
        }
        if self.is_priority() {
            events |= libc::POLLPRI;
        }
        events
    }
}

impl ops::BitOr for Interest {
    type Output = Interest;

    fn bitor(self, other: Interest) -> Interest {
        self.add(other)
    }
}

impl ops::BitOrAssign for Interest {
    fn bitor_assign(&mut self, other: Interest) {
        *self = self.add(other);
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (READABLE, "READABLE"),
            (WRITABLE, "WRITABLE"),
            (PRIORITY, "PRIORITY"),
            (ERROR, "ERROR"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.0 & bit != 0 {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

const R_READABLE: u8 = 1;
const R_WRITABLE: u8 = 1 << 1;
const R_READ_CLOSED: u8 = 1 << 2;
const R_WRITE_CLOSED: u8 = 1 << 3;
const R_PRIORITY: u8 = 1 << 4;
const R_ERROR: u8 = 1 << 5;

/// The readiness a descriptor reported, as tokio's `Ready`: what ended a
/// wait ([`AsyncFdReadyGuard::ready`](crate::io::unix::AsyncFdReadyGuard::ready),
/// [`TcpStream::ready`](crate::net::TcpStream::ready)).
///
/// It is the kernel's `poll` answer for the interest waited for, plus the
/// errors and hang-ups it reports to every waiter: `POLLIN` is readable,
/// `POLLOUT` writable, `POLLPRI` priority, `POLLERR` an error (and a closed
/// write side: a pipe whose reader is gone reports it), `POLLRDHUP` (the
/// peer shut down its writing) a closed read side, `POLLHUP` both sides
/// closed. A pipe whose writer is gone reports only a hang-up, so its
/// reader sees [`is_read_closed`](Self::is_read_closed) without
/// [`is_readable`](Self::is_readable).
///
/// # Example
/// ```
/// use fairlane::io::Ready;
/// let r = Ready::READABLE | Ready::READ_CLOSED;
/// assert!(r.is_readable() && r.is_read_closed());
/// assert!(!r.is_writable());
/// assert_eq!(r - Ready::READ_CLOSED, Ready::READABLE);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ready(u8);

impl Ready {
    /// Nothing.
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::EMPTY.is_empty());
    /// ```
    pub const EMPTY: Ready = Ready(0);
    /// Data to read (`POLLIN`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::READABLE.is_readable());
    /// ```
    pub const READABLE: Ready = Ready(R_READABLE);
    /// Room to write (`POLLOUT`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::WRITABLE.is_writable());
    /// ```
    pub const WRITABLE: Ready = Ready(R_WRITABLE);
    /// The read side is closed (`POLLRDHUP` or `POLLHUP`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::READ_CLOSED.is_read_closed());
    /// ```
    pub const READ_CLOSED: Ready = Ready(R_READ_CLOSED);
    /// The write side is closed or failed (`POLLHUP` or `POLLERR`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::WRITE_CLOSED.is_write_closed());
    /// ```
    pub const WRITE_CLOSED: Ready = Ready(R_WRITE_CLOSED);
    /// Urgent data (`POLLPRI`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::PRIORITY.is_priority());
    /// ```
    pub const PRIORITY: Ready = Ready(R_PRIORITY);
    /// An error is pending (`POLLERR`).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::io::Ready::ERROR.is_error());
    /// ```
    pub const ERROR: Ready = Ready(R_ERROR);
    /// Every kind.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::ALL.is_readable() && Ready::ALL.is_error());
    /// ```
    pub const ALL: Ready =
        Ready(R_READABLE | R_WRITABLE | R_READ_CLOSED | R_WRITE_CLOSED | R_PRIORITY | R_ERROR);

    /// The readiness of a `poll` event mask `revents`.
    pub(crate) fn from_revents(revents: u32) -> Ready {
        let has = |e: libc::c_short| revents & (e as u16 as u32) != 0;
        let mut r = 0;
        if has(libc::POLLIN) {
            r |= R_READABLE;
        }
        if has(libc::POLLOUT) {
            r |= R_WRITABLE;
        }
        if has(libc::POLLPRI) {
            r |= R_PRIORITY;
        }
        if has(libc::POLLRDHUP) {
            r |= R_READ_CLOSED;
        }
        if has(libc::POLLHUP) {
            r |= R_READ_CLOSED | R_WRITE_CLOSED;
        }
        if has(libc::POLLERR) {
            r |= R_ERROR | R_WRITE_CLOSED;
        }
        Ready(r)
    }

    /// The kinds of readiness a wait for `interest` reports (see
    /// [`narrowed_to`](Self::narrowed_to)).
    pub(crate) fn for_interest(interest: Interest) -> Ready {
        let mut mask = 0;
        if interest.is_readable() {
            mask |= R_READABLE | R_READ_CLOSED;
        }
        if interest.is_writable() {
            mask |= R_WRITABLE | R_WRITE_CLOSED;
        }
        if interest.is_priority() {
            mask |= R_PRIORITY | R_READ_CLOSED;
        }
        if interest.is_error() {
            mask |= R_ERROR;
        }
        Ready(mask)
    }

    pub(crate) fn bits(self) -> u8 {
        self.0
    }

    pub(crate) fn from_bits(bits: u8) -> Ready {
        Ready(bits & Ready::ALL.0)
    }

    /// `self` narrowed to what a wait for `interest` reports, as tokio's
    /// readiness: readable and read-closed for `READABLE`, writable and
    /// write-closed for `WRITABLE`, priority and read-closed for
    /// `PRIORITY`, the error for `ERROR`. Where nothing of that is set
    /// (the kernel reported only an error to a wait for reading), `self`
    /// is kept whole: a wait never reports nothing.
    pub(crate) fn narrowed_to(self, interest: Interest) -> Ready {
        match self.0 & Ready::for_interest(interest).0 {
            0 => self,
            narrowed => Ready(narrowed),
        }
    }

    /// Whether nothing is set.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::EMPTY.is_empty());
    /// assert!(!Ready::READABLE.is_empty());
    /// ```
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether data is there to read.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::READABLE.is_readable());
    /// assert!(!Ready::READ_CLOSED.is_readable());
    /// ```
    pub fn is_readable(self) -> bool {
        self.0 & R_READABLE != 0
    }

    /// Whether there is room to write.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::WRITABLE.is_writable());
    /// assert!(!Ready::READABLE.is_writable());
    /// ```
    pub fn is_writable(self) -> bool {
        self.0 & R_WRITABLE != 0
    }

    /// Whether the read side is closed: the peer shut down its writing,
    /// hung up, or (a pipe) every writer closed.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::READ_CLOSED.is_read_closed());
    /// assert!(!Ready::READABLE.is_read_closed());
    /// ```
    pub fn is_read_closed(self) -> bool {
        self.0 & R_READ_CLOSED != 0
    }

    /// Whether the write side is closed or failed: a hang-up, or an error
    /// (a pipe whose readers all closed).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::WRITE_CLOSED.is_write_closed());
    /// assert!(!Ready::WRITABLE.is_write_closed());
    /// ```
    pub fn is_write_closed(self) -> bool {
        self.0 & R_WRITE_CLOSED != 0
    }

    /// Whether urgent data is there.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::PRIORITY.is_priority());
    /// assert!(!Ready::READABLE.is_priority());
    /// ```
    pub fn is_priority(self) -> bool {
        self.0 & R_PRIORITY != 0
    }

    /// Whether an error is pending (read it with the descriptor's I/O, or
    /// `SO_ERROR` for a socket).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Ready;
    /// assert!(Ready::ERROR.is_error());
    /// assert!(!Ready::WRITE_CLOSED.is_error());
    /// ```
    pub fn is_error(self) -> bool {
        self.0 & R_ERROR != 0
    }
}

impl ops::BitOr for Ready {
    type Output = Ready;

    fn bitor(self, other: Ready) -> Ready {
        Ready(self.0 | other.0)
    }
}

impl ops::BitOrAssign for Ready {
    fn bitor_assign(&mut self, other: Ready) {
        self.0 |= other.0;
    }
}

impl ops::BitAnd for Ready {
    type Output = Ready;

    fn bitand(self, other: Ready) -> Ready {
        Ready(self.0 & other.0)
    }
}

impl ops::Sub for Ready {
    type Output = Ready;

    fn sub(self, other: Ready) -> Ready {
        Ready(self.0 & !other.0)
    }
}

impl fmt::Debug for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready")
            .field("is_readable", &self.is_readable())
            .field("is_writable", &self.is_writable())
            .field("is_read_closed", &self.is_read_closed())
            .field("is_write_closed", &self.is_write_closed())
            .field("is_priority", &self.is_priority())
            .field("is_error", &self.is_error())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revents_map_to_ready() {
        let m = |e: libc::c_short| e as u16 as u32;
        assert_eq!(Ready::from_revents(m(libc::POLLIN)), Ready::READABLE);
        assert_eq!(
            Ready::from_revents(m(libc::POLLHUP)),
            Ready::READ_CLOSED | Ready::WRITE_CLOSED
        );
        assert_eq!(
            Ready::from_revents(m(libc::POLLERR | libc::POLLOUT)),
            Ready::ERROR | Ready::WRITE_CLOSED | Ready::WRITABLE
        );
        assert_eq!(
            Ready::from_revents(m(libc::POLLIN | libc::POLLRDHUP)),
            Ready::READABLE | Ready::READ_CLOSED
        );
        assert_eq!(Ready::from_revents(m(libc::POLLPRI)), Ready::PRIORITY);
        assert_eq!(Ready::from_revents(0), Ready::EMPTY);
    }

    #[test]
    fn interest_debug_and_events() {
        let i = Interest::READABLE | Interest::PRIORITY;
        assert_eq!(format!("{i:?}"), "READABLE | PRIORITY");
        assert_eq!(
            i.poll_events(),
            libc::POLLIN | libc::POLLRDHUP | libc::POLLPRI
        );
        assert_eq!(Interest::ERROR.poll_events(), 0);
        assert!(i.contains(Interest::PRIORITY));
        assert!(!i.contains(Interest::WRITABLE));
    }
}
