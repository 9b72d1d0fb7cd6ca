//! One connection: read what the client sent into an owned buffer, run the
//! [`protocol`](crate::protocol) over it, write the replies, again.
//!
//! What a connection holds is bounded whatever its client sends:
//!
//! - Input: [`IDLE_READ`] bytes while its commands are small, up to
//!   [`READ_BUFFER`] while a read fills what it has; a command larger than
//!   that is given room only once the session reserved it against the
//!   store's memory limit. Every buffer shrinks back once what needed it
//!   has run.
//! - Replies: the session stops once [`HIGH_WATER`](crate::protocol::HIGH_WATER)
//!   bytes wait (large values shared with the store, not copied), they are
//!   written, and it goes on; no more is read meanwhile, so a client that
//!   does not read its replies stops being read. The buffer is given back
//!   when it grew past what small replies need.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;

use fairlane::io::{IoBuf, IoBufMut};
use fairlane::net::TcpStream;

use super::open::Open;
use super::shutdown::Registration;
use crate::protocol::{Replies, Session, READ_BUFFER};

/// The input buffer of a connection whose commands are small.
pub const IDLE_READ: usize = 2 * 1024;

/// The most memory one connection holds besides what the store's memory
/// limit counts: its input buffer ([`READ_BUFFER`]), its replies' own bytes
/// ([`Replies::bound`]), and its task, socket and session (a few hundred
/// bytes), rounded up. With `-c` connections at most, the server holds no
/// more than `-m` plus `-c` times this for its clients, whatever they send.
pub const CONNECTION_MEMORY: usize = 64 * 1024;

/// One connection, until its client closes it, sends `quit`, or the server
/// stops while it is between commands.
pub(super) async fn connection(stream: TcpStream, open: Open, mut registration: Registration) {
    let shared = &open.shared;
    let _ = stream.set_nodelay(true);
    let mut session = Session::new();
    let mut input = Vec::with_capacity(IDLE_READ);
    let mut replies = Replies::default();
    loop {
        let between_commands = input.is_empty() && !session.mid_command();
        if between_commands && registration.stopping() {
            break;
        }
        let room = input.capacity() - input.len();
        let read = stream.read_owned(Tail(input));
        let (n, buf) = if between_commands {
            // Between commands, a stop ends the wait for the next one.
            let stopped = async {
                poll_fn(|cx| registration.poll_stopped(cx)).await;
                None
            };
            match futures_lite::future::or(async { Some(read.await) }, stopped).await {
                Some(read) => read,
                None => break,
            }
        } else {
            read.await
        };
        input = buf.0;
        let filled = match n {
            Ok(n) if n > 0 => n == room,
            // End of stream or an error (reset): this connection is done.
            _ => break,
        };
        // Run what arrived, sending the replies each time they reach their
        // high-water mark.
        let mut start = 0;
        let done = loop {
            let done = session.execute_bounded(shared, &input[start..], &mut replies);
            start += done.consumed;
            if !replies.is_empty() && send(&stream, &mut replies).await.is_err() {
                return;
            }
            if !done.paused {
                break done;
            }
        };
        if done.close {
            break;
        }
        input.drain(..start);
        resize(&mut input, done.wanted, filled);
    }
}

/// Gives `input` (what is left of a command, after its complete ones ran)
/// the capacity the next read wants: room for the command still arriving
/// (reserved by the session past [`READ_BUFFER`]), the read buffer while
/// reads fill what they are given, and otherwise the idle one.
fn resize(input: &mut Vec<u8>, wanted: usize, filled: bool) {
    let capacity = if wanted > READ_BUFFER {
        wanted
    } else if filled || wanted > IDLE_READ || input.len() > IDLE_READ / 2 {
        READ_BUFFER
    } else {
        IDLE_READ
    }
    .max(input.len() + 1);
    if capacity > input.capacity() {
        input.reserve_exact(capacity - input.len());
    } else if capacity < input.capacity() {
        let mut smaller = Vec::with_capacity(capacity);
        smaller.extend_from_slice(input);
        *input = smaller;
    }
}

/// Writes `replies` in order: their bytes in pieces, between them the
/// values they share with the store.
async fn send(stream: &TcpStream, replies: &mut Replies) -> io::Result<()> {
    let mut piece = Piece {
        bytes: std::mem::take(&mut replies.bytes),
        start: 0,
        end: 0,
    };
    for (at, value) in std::mem::take(&mut replies.shared) {
        piece.end = at;
        if piece.end > piece.start {
            let (written, back) = stream.write_all_owned(piece).await;
            written?;
            piece = back;
        }
        stream.write_all_owned(Value(value)).await.0?;
        piece.start = at;
    }
    piece.end = piece.bytes.len();
    if piece.end > piece.start {
        let (written, back) = stream.write_all_owned(piece).await;
        written?;
        piece = back;
    }
    replies.bytes = piece.bytes;
    replies.clear();
    Ok(())
}

/// Bytes `start..end` of a buffer, written without a copy.
struct Piece {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

// SAFETY: the Vec's heap block does not move when the value moves and is
// not changed while the piece is written; `start <= end <= len`, so the
// `end - start` bytes from `start` are initialised.
unsafe impl IoBuf for Piece {
    fn stable_ptr(&self) -> *const u8 {
        self.bytes[self.start..self.end].as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.end - self.start
    }
}

/// A value shared with the store, written without a copy.
struct Value(Arc<[u8]>);

// SAFETY: an `Arc`'s block does not move when the `Arc` moves, and a
// shared `[u8]` is never written: its `len` bytes stay initialised and in
// place while the value lives.
unsafe impl IoBuf for Value {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.len()
    }
}

/// A `Vec` read into after its initialised bytes, so that a read adds to
/// what is there.
struct Tail(Vec<u8>);

// SAFETY: the Vec's heap block does not move when the value moves, and
// `len` initialised bytes start at its pointer.
unsafe impl IoBuf for Tail {
    fn stable_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.0.len()
    }
}

// SAFETY: the `capacity - len` bytes after the initialised ones are
// allocated, writable and stay put while the value moves; `set_init(n)`
// marks `n` of them initialised, within the capacity as the caller
// promises `n <= bytes_total()`.
unsafe impl IoBufMut for Tail {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.0.spare_capacity_mut().as_mut_ptr().cast()
    }
    fn bytes_total(&self) -> usize {
        self.0.capacity() - self.0.len()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: the caller promises the `n` bytes after `len` were
        // written, and `len + n <= capacity`.
        unsafe { self.0.set_len(self.0.len() + n) }
    }
}

#[cfg(test)]
mod tests {
    use super::{resize, CONNECTION_MEMORY, IDLE_READ};
    use crate::protocol::{Replies, READ_BUFFER};

    #[test]
    fn a_connection_fits_its_stated_bound() {
        let own = READ_BUFFER + Replies::default().bound();
        let state = std::mem::size_of::<crate::protocol::Session>() + 4096;
        assert!(own + state <= CONNECTION_MEMORY, "{own} + {state}");
    }

    #[test]
    fn the_input_buffer_grows_while_filled_and_shrinks_back() {
        let mut input = Vec::with_capacity(IDLE_READ);
        resize(&mut input, 0, true);
        assert_eq!(input.capacity(), READ_BUFFER);
        resize(&mut input, 0, false);
        assert_eq!(input.capacity(), IDLE_READ);
        // A command still arriving: room for it, then back.
        input.extend_from_slice(&[b'x'; 100]);
        resize(&mut input, 100_000, false);
        assert_eq!(input.capacity(), 100_000);
        input.clear();
        resize(&mut input, 0, false);
        assert_eq!(input.capacity(), IDLE_READ);
        // What is left is kept.
        input.extend_from_slice(&[b'y'; 1500]);
        resize(&mut input, 3000, false);
        assert_eq!((input.capacity(), input.len()), (READ_BUFFER, 1500));
    }
}
