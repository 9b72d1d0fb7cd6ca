//! Where a [`Session`](super::Session) puts its replies.
//!
//! A plain `Vec<u8>` takes every byte, values copied. [`Replies`] is the
//! server's: it copies small values, shares large ones with the store (a
//! reference, no copy: a connection that pipelines gets of one large value
//! holds it once), and has a high-water mark past which the session stops
//! and lets the server write what is there before it goes on. Its own
//! bytes are therefore bounded by [`Replies::bound`], whatever the client
//! sends; the shared values are the store's, counted against its memory
//! limit even after it lets them go (see `store/memory.rs`).

use std::io::Write as _;
use std::sync::Arc;

/// Values at least this large are shared with the store, not copied.
pub const SHARE_MIN: usize = 8 * 1024;

/// The default high-water mark of [`Replies`]: the session stops running
/// commands once this much is waiting to be sent.
pub const HIGH_WATER: usize = 32 * 1024;

/// The longest piece a session writes at once besides a value it shares:
/// a `VALUE` line (a key of 250 bytes and three numbers) before a copied
/// value, a `stats` reply, an error line.
const PIECE_MAX: usize = 2 * 1024;

/// A place in a [`Sink`]: its bytes and shared values so far.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    bytes: usize,
    shared: usize,
}

/// What a session writes its replies into.
pub(crate) trait Sink {
    /// Adds bytes.
    fn put(&mut self, bytes: &[u8]);
    /// Adds a value's bytes. The caller holds the value's shard lock (so
    /// that the store sees every share of it).
    fn put_value(&mut self, value: &Arc<[u8]>);
    /// Whether the session should stop and let the replies be sent.
    fn full(&self) -> bool;
    /// Where the next reply goes, for [`truncate`](Self::truncate).
    fn mark(&self) -> Mark;
    /// Drops what was added since `mark` (a `noreply` command's reply, a
    /// get that ends in an error).
    fn truncate(&mut self, mark: Mark);
    /// Adds formatted text.
    fn put_fmt(&mut self, args: std::fmt::Arguments<'_>);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    fn put_value(&mut self, value: &Arc<[u8]>) {
        self.extend_from_slice(value);
    }
    fn full(&self) -> bool {
        false
    }
    fn mark(&self) -> Mark {
        Mark {
            bytes: self.len(),
            shared: 0,
        }
    }
    fn truncate(&mut self, mark: Mark) {
        Vec::truncate(self, mark.bytes);
    }
    fn put_fmt(&mut self, args: std::fmt::Arguments<'_>) {
        let _ = self.write_fmt(args);
    }
}

/// Replies waiting to be sent: bytes, and large values shared with the
/// store, in order. See [`Session::execute_bounded`](super::Session::execute_bounded).
///
/// # Example
/// ```
/// use fairlane_memcached::protocol::Replies;
///
/// let replies = Replies::new(64 * 1024);
/// assert!(replies.is_empty());
/// assert!(replies.bound() >= 64 * 1024);
/// ```
#[derive(Debug)]
pub struct Replies {
    pub(crate) bytes: Vec<u8>,
    /// Shared values, each with the offset in `bytes` it goes before.
    pub(crate) shared: Vec<(usize, Arc<[u8]>)>,
    shared_len: usize,
    high_water: usize,
}

impl Default for Replies {
    /// Replies with the [`HIGH_WATER`] mark.
    fn default() -> Replies {
        Replies::new(HIGH_WATER)
    }
}

impl Replies {
    /// No replies yet; the session stops once `high_water` bytes wait.
    pub fn new(high_water: usize) -> Replies {
        Replies {
            bytes: Vec::new(),
            shared: Vec::new(),
            shared_len: 0,
            high_water: high_water.max(1),
        }
    }

    /// The most bytes of its own the replies hold (shared values aside):
    /// the high-water mark, and the longest piece added past it.
    ///
    /// # Example
    /// See [`Replies`].
    pub fn bound(&self) -> usize {
        self.high_water + SHARE_MIN + PIECE_MAX
    }

    /// Every byte waiting, copied or shared.
    ///
    /// # Example
    /// ```
    /// use fairlane_memcached::protocol::{Replies, Session, Shared};
    /// use fairlane_memcached::store::{Config, Store, SystemClock};
    ///
    /// let shared = Shared::new(Store::new(Config::default(), std::sync::Arc::new(SystemClock)), 1);
    /// let mut replies = Replies::default();
    /// Session::new().execute_bounded(&shared, b"version\r\n", &mut replies);
    /// assert_eq!(replies.len(), replies.parts().map(<[u8]>::len).sum::<usize>());
    /// ```
    pub fn len(&self) -> usize {
        self.bytes.len() + self.shared_len
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes to send, in order, in pieces.
    ///
    /// # Example
    /// See [`len`](Self::len).
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        let shared = self.shared.iter().flat_map(move |(at, value)| {
            let before = &self.bytes[start..*at];
            start = *at;
            [before, &value[..]]
        });
        let last = self.shared.last().map_or(0, |(at, _)| *at);
        shared
            .chain(std::iter::once(&self.bytes[last..]))
            .filter(|part| !part.is_empty())
    }

    /// Forgets every reply (once sent), keeping the buffer unless it grew
    /// past what replies usually need.
    ///
    /// # Example
    /// ```
    /// use fairlane_memcached::protocol::{Replies, Session, Shared};
    /// use fairlane_memcached::store::{Config, Store, SystemClock};
    ///
    /// let shared = Shared::new(Store::new(Config::default(), std::sync::Arc::new(SystemClock)), 1);
    /// let mut replies = Replies::default();
    /// Session::new().execute_bounded(&shared, b"version\r\n", &mut replies);
    /// replies.clear();
    /// assert!(replies.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.shared.clear();
        self.shared_len = 0;
        if self.bytes.capacity() > PIECE_MAX {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
    }
}

impl Sink for Replies {
    fn put(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }
    fn put_value(&mut self, value: &Arc<[u8]>) {
        if value.len() >= SHARE_MIN {
            self.shared_len += value.len();
            self.shared.push((self.bytes.len(), value.clone()));
        } else {
            self.bytes.extend_from_slice(value);
        }
    }
    fn full(&self) -> bool {
        self.len() >= self.high_water
    }
    fn mark(&self) -> Mark {
        Mark {
            bytes: self.bytes.len(),
            shared: self.shared.len(),
        }
    }
    fn truncate(&mut self, mark: Mark) {
        self.bytes.truncate(mark.bytes);
        for (_, value) in self.shared.drain(mark.shared..) {
            self.shared_len -= value.len();
        }
    }
    fn put_fmt(&mut self, args: std::fmt::Arguments<'_>) {
        let _ = self.bytes.write_fmt(args);
    }
}
