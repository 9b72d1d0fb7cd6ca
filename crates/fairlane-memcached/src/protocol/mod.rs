//! memcached's text protocol, without sockets: a [`Session`] takes the
//! bytes a connection received and appends the replies to send, so that it
//! can be tested with byte strings.
//!
//! Commands: `get`/`gets`/`gat`/`gats` (any number of keys), `set`, `add`,
//! `replace`, `append`, `prepend`, `cas`, `delete`, `incr`, `decr`,
//! `touch`, `flush_all`, `version`, `verbosity`, `stats` (and `stats
//! reset`), `quit`. Replies are memcached 1.6's, byte for byte, including
//! its errors and the way it reads lines: words split at spaces, numbers
//! read as C's `strtol` reads them, `noreply` honoured where memcached
//! looks for it (the last word of a command that takes it), a line
//! without its end past [`LINE_MAX`] bytes closing the connection unless
//! it is a `get`/`gets`.
//!
//! A session also bounds what a client can make a connection hold: a
//! command larger than [`READ_BUFFER`] (a large value, a long get line) is
//! given room only once it is reserved against the store's memory limit
//! (refused, like memcached, with `SERVER_ERROR out of memory storing
//! object` when the limit is taken by other such commands), and with
//! [`Replies`] it stops running commands once a high-water mark of replies
//! waits to be sent.

mod commands;
mod replies;

use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::store::{Reservation, Store};

use self::replies::Sink;
pub use self::replies::{Replies, HIGH_WATER, SHARE_MIN};

/// The longest key memcached accepts.
pub const KEY_MAX: usize = 250;

/// memcached's longest line without its end: past it the connection is
/// closed, unless the line is a `get` or `gets` (which may have many
/// keys).
pub const LINE_MAX: usize = 2048;

/// The longest `get`/`gets` line: past it, `CLIENT_ERROR line too long`
/// and the connection is closed (memcached has no such limit).
pub const GET_LINE_MAX: usize = 1 << 20;

/// The bytes of one command a connection holds without a reservation; a
/// larger command is given room only once reserved against the memory
/// limit. The server reads into a buffer of this size.
pub const READ_BUFFER: usize = 16 * 1024;

/// The version reported: the protocol's (clients look at it to know what
/// to expect), then the server's own.
pub const VERSION: &str = concat!("1.6.0-fairlane-memcached-", env!("CARGO_PKG_VERSION"));

/// What every connection shares: the store and the server's counters.
#[derive(Debug)]
pub struct Shared {
    /// The items.
    pub store: Store,
    /// When the server started, in Unix seconds.
    pub started: u64,
    /// The runtime's processors (`stats`' `threads`).
    pub processors: usize,
    /// The most connections open at once; more are refused.
    pub max_connections: usize,
    /// Connections open now.
    pub curr_connections: AtomicU64,
    /// Connections ever accepted.
    pub total_connections: AtomicU64,
    /// Connections refused for [`max_connections`](Self::max_connections).
    pub rejected_connections: AtomicU64,
    /// The level `verbosity` set (kept, reported by nothing else).
    pub verbosity: AtomicU32,
}

impl Shared {
    /// The state of a server whose store is `store`, with memcached's
    /// default of 1024 connections at most.
    pub fn new(store: Store, processors: usize) -> Shared {
        let started = store.now();
        Shared {
            store,
            started,
            processors,
            max_connections: 1024,
            curr_connections: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            verbosity: AtomicU32::new(0),
        }
    }
}

/// What [`Session::execute`] did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// Bytes of the input used; the rest is to be passed again, with what
    /// follows it.
    pub consumed: usize,
    /// The connection is to be closed once the replies are sent (`quit`,
    /// a line too long).
    pub close: bool,
    /// How many bytes the incomplete command at the start of the rest
    /// needs in all, when known (a storage command waiting for its value,
    /// a long get line), so that the caller can make room: more than
    /// [`READ_BUFFER`] only while the session holds a reservation for it.
    pub wanted: usize,
    /// The session stopped at the replies' high-water mark
    /// ([`Session::execute_bounded`]): send them, then pass the rest again
    /// before reading more.
    pub paused: bool,
}

impl Executed {
    fn at(consumed: usize) -> Executed {
        Executed {
            consumed,
            close: false,
            wanted: 0,
            paused: false,
        }
    }
}

/// One connection's protocol state.
#[derive(Debug, Default)]
pub struct Session {
    /// Bytes still to skip: the value of a storage command refused before
    /// its value arrived.
    swallow: usize,
    /// Keys of the get at the start of the input already answered, when
    /// it stopped at the replies' high-water mark.
    keys_done: usize,
    /// Room reserved for the command at the start of the input while it
    /// arrives.
    reserved: Option<Reservation>,
}

/// What one command did.
enum Step {
    /// Done, having used this many bytes after its line.
    Done(usize),
    /// Its value has not all arrived: it needs this many bytes after its
    /// line.
    NeedData(usize),
    /// Done, and this many bytes after its line are to be skipped.
    Swallow(usize),
    /// Stopped at the replies' high-water mark, to be run again.
    Paused,
    /// Done; close the connection.
    Close,
}

impl Session {
    /// A session in its initial state.
    pub fn new() -> Session {
        Session::default()
    }

    /// Whether the session is in the middle of a command (skipping the
    /// value of a refused one), as opposed to waiting for the next one.
    pub fn mid_command(&self) -> bool {
        self.swallow > 0
    }

    /// Runs the complete commands at the start of `input` against
    /// `shared`, appending their replies to `out` (values copied).
    pub fn execute(&mut self, shared: &Shared, input: &[u8], out: &mut Vec<u8>) -> Executed {
        self.run(shared, input, out)
    }

    /// As [`execute`](Self::execute), into `out`, sharing large values
    /// with the store and stopping once `out` reaches its high-water mark
    /// ([`Executed::paused`]).
    ///
    /// # Example
    /// ```
    /// use std::sync::Arc;
    /// use fairlane_memcached::protocol::{Replies, Session, Shared};
    /// use fairlane_memcached::store::{Config, Store, SystemClock};
    ///
    /// let shared = Shared::new(Store::new(Config::default(), Arc::new(SystemClock)), 1);
    /// let mut session = Session::new();
    /// let mut out = Replies::new(16);
    /// let input = b"set k 0 0 20\r\n01234567890123456789\r\nget k k\r\n";
    /// let done = session.execute_bounded(&shared, input, &mut out);
    /// // Past 16 bytes of replies, the get stopped after its first key...
    /// assert!(done.paused);
    /// assert_eq!(out.parts().collect::<Vec<_>>().concat(), b"STORED\r\nVALUE k 0 20\r\n01234567890123456789\r\n");
    /// // ... and goes on from there once they are sent.
    /// out.clear();
    /// let rest = &input[done.consumed..];
    /// assert!(!session.execute_bounded(&shared, rest, &mut out).paused);
    /// assert_eq!(out.parts().collect::<Vec<_>>().concat(), b"VALUE k 0 20\r\n01234567890123456789\r\nEND\r\n");
    /// ```
    pub fn execute_bounded(
        &mut self,
        shared: &Shared,
        input: &[u8],
        out: &mut Replies,
    ) -> Executed {
        self.run(shared, input, out)
    }

    fn run<S: Sink>(&mut self, shared: &Shared, input: &[u8], out: &mut S) -> Executed {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            if self.swallow > 0 {
                let n = self.swallow.min(rest.len());
                self.swallow -= n;
                pos += n;
                if self.swallow > 0 {
                    return Executed::at(pos);
                }
                continue;
            }
            if rest.is_empty() {
                return Executed::at(pos);
            }
            if out.full() {
                return Executed {
                    paused: true,
                    ..Executed::at(pos)
                };
            }
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                return self.partial_line(shared, rest, pos, out);
            };
            // As memcached: the `\r` before the `\n` goes unless it is the
            // whole line, and the line ends at a NUL.
            let mut line = &rest[..nl];
            if nl > 1 && line[nl - 1] == b'\r' {
                line = &line[..nl - 1];
            }
            if let Some(nul) = line.iter().position(|&b| b == 0) {
                line = &line[..nul];
            }
            match self.command(shared, line, nl + 1, &rest[nl + 1..], out) {
                Step::Done(n) => {
                    pos += nl + 1 + n;
                    self.reserved = None;
                    self.keys_done = 0;
                }
                Step::NeedData(n) => {
                    return Executed {
                        wanted: nl + 1 + n,
                        ..Executed::at(pos)
                    }
                }
                Step::Swallow(n) => {
                    pos += nl + 1;
                    self.swallow = n;
                    self.reserved = None;
                }
                Step::Paused => {
                    return Executed {
                        paused: true,
                        ..Executed::at(pos)
                    }
                }
                Step::Close => {
                    return Executed {
                        close: true,
                        ..Executed::at(pos + nl + 1)
                    }
                }
            }
        }
    }

    /// A line whose end has not arrived, `rest` from `pos` on.
    fn partial_line<S: Sink>(
        &mut self,
        shared: &Shared,
        rest: &[u8],
        pos: usize,
        out: &mut S,
    ) -> Executed {
        if rest.len() <= LINE_MAX {
            return Executed::at(pos);
        }
        // memcached: no end after 2048 bytes must be a large get; anything
        // else closes the connection, with no reply.
        let spaces = rest.iter().take_while(|&&b| b == b' ').count();
        let get = rest[spaces..].starts_with(b"get ") || rest[spaces..].starts_with(b"gets ");
        let close = Executed {
            close: true,
            ..Executed::at(pos + rest.len())
        };
        if spaces > 100 || !get {
            return close;
        }
        if rest.len() >= GET_LINE_MAX {
            out.put(b"CLIENT_ERROR line too long\r\n");
            return close;
        }
        // Room for a line twice as long, reserved past what a connection
        // holds anyway.
        let wanted = (2 * rest.len()).min(GET_LINE_MAX);
        if wanted > READ_BUFFER && self.reserved.as_ref().is_none_or(|r| r.bytes() < wanted) {
            self.reserved = None;
            match shared.store.reserve(wanted) {
                Some(room) => self.reserved = Some(room),
                None => {
                    out.put(b"SERVER_ERROR out of memory reading request\r\n");
                    return close;
                }
            }
        }
        Executed {
            wanted,
            ..Executed::at(pos)
        }
    }

    /// Room for a storage command of `bytes` in all that has not all
    /// arrived: whether the connection may wait for the rest (reserved
    /// against the memory limit if it is larger than [`READ_BUFFER`]).
    fn room_for(&mut self, shared: &Shared, bytes: usize) -> bool {
        if bytes <= READ_BUFFER || self.reserved.is_some() {
            return true;
        }
        self.reserved = shared.store.reserve(bytes);
        self.reserved.is_some()
    }
}

#[cfg(test)]
mod tests;
