//! memcached's text protocol, without sockets: a [`Session`] takes the
//! bytes a connection received and appends the replies to send, so that it
//! can be tested with byte strings.
//!
//! Commands: `get`/`gets` (any number of keys), `set`, `add`, `replace`,
//! `append`, `prepend`, `cas`, `delete`, `incr`, `decr`, `touch`,
//! `flush_all`, `version`, `verbosity`, `stats` (and `stats reset`),
//! `quit`; `noreply` where memcached takes it. Errors are memcached's:
//! `ERROR` for an unknown command, `CLIENT_ERROR bad command line format`
//! for a malformed one or a key over 250 bytes, `CLIENT_ERROR bad data
//! chunk` for a value not followed by `\r\n`, `SERVER_ERROR object too
//! large for cache` for one over the item size limit (its bytes are
//! skipped).

use std::io::Write as _;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::store::{Counted, Mode, Store, Stored};

/// The longest key memcached accepts.
pub const KEY_MAX: usize = 250;

/// The longest command line; a longer one without its end closes the
/// connection (after `CLIENT_ERROR line too long`).
pub const LINE_MAX: usize = 64 * 1024;

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
    /// Connections open now.
    pub curr_connections: AtomicU64,
    /// Connections ever accepted.
    pub total_connections: AtomicU64,
    /// The level `verbosity` set (kept, reported by nothing else).
    pub verbosity: AtomicU32,
}

impl Shared {
    /// The state of a server whose store is `store`.
    pub fn new(store: Store, processors: usize) -> Shared {
        let started = store.now();
        Shared {
            store,
            started,
            processors,
            curr_connections: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            verbosity: AtomicU32::new(0),
        }
    }
}

/// What [`Session::execute`] did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// Bytes of the input used; the rest is the start of a command still
    /// incomplete, to be passed again with what follows.
    pub consumed: usize,
    /// The connection is to be closed once the replies are sent (`quit`,
    /// or a line too long).
    pub close: bool,
    /// How many bytes the incomplete command needs in all, when known (a
    /// storage command waiting for its value), so that the caller can make
    /// room.
    pub wanted: usize,
}

/// One connection's protocol state.
#[derive(Debug, Default)]
pub struct Session {
    /// Bytes still to skip: the value of a storage command refused before
    /// its value arrived.
    swallow: usize,
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
    /// Done; close the connection.
    Close,
}

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

/// The most tokens a command other than get/gets has (`cas` with
/// `noreply`), and one more to notice extra ones.
const TOKENS: usize = 8;

fn number<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
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
    /// `shared`, appending their replies to `out`.
    pub fn execute(&mut self, shared: &Shared, input: &[u8], out: &mut Vec<u8>) -> Executed {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            if self.swallow > 0 {
                let n = self.swallow.min(rest.len());
                self.swallow -= n;
                pos += n;
                if self.swallow > 0 {
                    return Executed {
                        consumed: pos,
                        close: false,
                        wanted: 0,
                    };
                }
                continue;
            }
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                if rest.len() > LINE_MAX {
                    out.extend_from_slice(b"CLIENT_ERROR line too long\r\n");
                    return Executed {
                        consumed: input.len(),
                        close: true,
                        wanted: 0,
                    };
                }
                return Executed {
                    consumed: pos,
                    close: false,
                    wanted: 0,
                };
            };
            let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
            match self.command(shared, line, &rest[nl + 1..], out) {
                Step::Done(n) => pos += nl + 1 + n,
                Step::NeedData(n) => {
                    return Executed {
                        consumed: pos,
                        close: false,
                        wanted: nl + 1 + n,
                    }
                }
                Step::Swallow(n) => {
                    pos += nl + 1;
                    self.swallow = n;
                }
                Step::Close => {
                    return Executed {
                        consumed: pos + nl + 1,
                        close: true,
                        wanted: 0,
                    }
                }
            }
        }
    }

    fn command(&mut self, shared: &Shared, line: &[u8], data: &[u8], out: &mut Vec<u8>) -> Step {
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        let Some(name) = words.next() else {
            out.extend_from_slice(b"ERROR\r\n");
            return Step::Done(0);
        };
        if name == b"get" || name == b"gets" {
            get(shared, words, name == b"gets", out);
            return Step::Done(0);
        }
        let mut tokens: [&[u8]; TOKENS] = [&[]; TOKENS];
        let mut n = 0;
        for w in words {
            if n == TOKENS {
                out.extend_from_slice(b"ERROR\r\n");
                return Step::Done(0);
            }
            tokens[n] = w;
            n += 1;
        }
        let args = &tokens[..n];
        // `noreply` as the last word silences the command's reply.
        let noreply = args.last() == Some(&&b"noreply"[..]);
        let mark = out.len();
        let reply = &mut *out;
        let step = match name {
            b"set" => self.storage(shared, Some(Mode::Set), args, data, reply),
            b"add" => self.storage(shared, Some(Mode::Add), args, data, reply),
            b"replace" => self.storage(shared, Some(Mode::Replace), args, data, reply),
            b"append" => self.storage(shared, Some(Mode::Append), args, data, reply),
            b"prepend" => self.storage(shared, Some(Mode::Prepend), args, data, reply),
            b"cas" => self.storage(shared, None, args, data, reply),
            b"delete" => {
                delete(shared, args, noreply, reply);
                Step::Done(0)
            }
            b"incr" | b"decr" => {
                count(shared, args, name == b"incr", reply);
                Step::Done(0)
            }
            b"touch" => {
                touch(shared, args, reply);
                Step::Done(0)
            }
            b"flush_all" => {
                flush_all(shared, args, noreply, reply);
                Step::Done(0)
            }
            b"verbosity" => {
                verbosity(shared, args, noreply, reply);
                Step::Done(0)
            }
            b"version" => {
                let _ = write!(out, "VERSION {VERSION}\r\n");
                return Step::Done(0);
            }
            b"stats" => {
                stats(shared, args, out);
                return Step::Done(0);
            }
            b"quit" => return Step::Close,
            _ => {
                out.extend_from_slice(b"ERROR\r\n");
                return Step::Done(0);
            }
        };
        if noreply {
            out.truncate(mark);
        }
        step
    }

    /// set/add/replace/append/prepend (`mode`), or cas (`None`):
    /// `KEY FLAGS EXPTIME BYTES [CAS] [noreply]`, then the value.
    fn storage(
        &mut self,
        shared: &Shared,
        mode: Option<Mode>,
        args: &[&[u8]],
        data: &[u8],
        reply: &mut Vec<u8>,
    ) -> Step {
        let fixed = if mode.is_some() { 4 } else { 5 };
        if args.len() != fixed && args.len() != fixed + 1 {
            reply.extend_from_slice(b"ERROR\r\n");
            return Step::Done(0);
        }
        let key = args[0];
        let parsed = (
            number::<u32>(args[1]),
            number::<i32>(args[2]),
            number::<i32>(args[3]),
            match mode {
                Some(mode) => Some(mode),
                None => number::<u64>(args[4]).map(Mode::Cas),
            },
        );
        let (Some(flags), Some(exptime), Some(bytes), Some(mode)) = parsed else {
            reply.extend_from_slice(BAD_FORMAT);
            return Step::Done(0);
        };
        if key.len() > KEY_MAX || bytes < 0 {
            reply.extend_from_slice(BAD_FORMAT);
            return Step::Done(0);
        }
        let bytes = bytes as usize;
        if bytes > shared.store.item_size_max() {
            reply.extend_from_slice(b"SERVER_ERROR object too large for cache\r\n");
            // As memcached: a failed set leaves no stale value behind.
            if mode == Mode::Set {
                shared.store.delete(key);
            }
            return Step::Swallow(bytes + 2);
        }
        if data.len() < bytes + 2 {
            return Step::NeedData(bytes + 2);
        }
        if &data[bytes..bytes + 2] != b"\r\n" {
            reply.extend_from_slice(b"CLIENT_ERROR bad data chunk\r\n");
            return Step::Done(bytes + 2);
        }
        let stored = shared
            .store
            .store(mode, key, flags, i64::from(exptime), &data[..bytes]);
        reply.extend_from_slice(match stored {
            Stored::Stored => b"STORED\r\n",
            Stored::NotStored => b"NOT_STORED\r\n",
            Stored::Exists => b"EXISTS\r\n",
            Stored::NotFound => b"NOT_FOUND\r\n",
            Stored::OutOfMemory => b"SERVER_ERROR out of memory storing object\r\n",
        });
        Step::Done(bytes + 2)
    }
}

fn get<'a>(
    shared: &Shared,
    keys: impl Iterator<Item = &'a [u8]> + Clone,
    with_cas: bool,
    out: &mut Vec<u8>,
) {
    let mut any = false;
    for key in keys.clone() {
        any = true;
        if key.len() > KEY_MAX {
            out.extend_from_slice(BAD_FORMAT);
            return;
        }
    }
    if !any {
        out.extend_from_slice(b"ERROR\r\n");
        return;
    }
    for key in keys {
        shared.store.get(key, |item| {
            out.extend_from_slice(b"VALUE ");
            out.extend_from_slice(key);
            let _ = if with_cas {
                write!(out, " {} {} {}\r\n", item.flags, item.value.len(), item.cas)
            } else {
                write!(out, " {} {}\r\n", item.flags, item.value.len())
            };
            out.extend_from_slice(&item.value);
            out.extend_from_slice(b"\r\n");
        });
    }
    out.extend_from_slice(b"END\r\n");
}

/// `delete KEY [0] [noreply]` (the 0 is an old form of the command).
fn delete(shared: &Shared, args: &[&[u8]], noreply: bool, reply: &mut Vec<u8>) {
    if args.is_empty() || args.len() > 3 {
        reply.extend_from_slice(b"ERROR\r\n");
        return;
    }
    let extra = &args[1..(args.len() - usize::from(noreply)).max(1)];
    if !(extra.is_empty() || extra == [b"0"]) {
        reply.extend_from_slice(
            b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
        );
        return;
    }
    if args[0].len() > KEY_MAX {
        reply.extend_from_slice(BAD_FORMAT);
        return;
    }
    reply.extend_from_slice(if shared.store.delete(args[0]) {
        b"DELETED\r\n"
    } else {
        b"NOT_FOUND\r\n"
    });
}

/// The key and the parsed second word of `KEY WORD [noreply]` (incr,
/// decr, touch); `None` once the error (`invalid`, for a word that does not
/// parse) is in `reply`.
fn key_and<'a, T: std::str::FromStr>(
    args: &[&'a [u8]],
    invalid: &[u8],
    reply: &mut Vec<u8>,
) -> Option<(&'a [u8], T)> {
    let error: &[u8] = match args {
        [key, word] | [key, word, _] if key.len() <= KEY_MAX => match number(word) {
            Some(value) => return Some((key, value)),
            None => invalid,
        },
        [_, _] | [_, _, _] => BAD_FORMAT,
        _ => b"ERROR\r\n",
    };
    reply.extend_from_slice(error);
    None
}

/// `incr|decr KEY DELTA [noreply]`.
fn count(shared: &Shared, args: &[&[u8]], increment: bool, reply: &mut Vec<u8>) {
    let invalid = b"CLIENT_ERROR invalid numeric delta argument\r\n";
    let Some((key, delta)) = key_and::<u64>(args, invalid, reply) else {
        return;
    };
    match shared.store.count(key, delta, increment) {
        Counted::Value(v) => {
            let _ = write!(reply, "{v}\r\n");
        }
        Counted::NotFound => reply.extend_from_slice(b"NOT_FOUND\r\n"),
        Counted::NotANumber => reply
            .extend_from_slice(b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
    }
}

/// `touch KEY EXPTIME [noreply]`.
fn touch(shared: &Shared, args: &[&[u8]], reply: &mut Vec<u8>) {
    let invalid = b"CLIENT_ERROR invalid exptime argument\r\n";
    let Some((key, exptime)) = key_and::<i32>(args, invalid, reply) else {
        return;
    };
    reply.extend_from_slice(if shared.store.touch(key, i64::from(exptime)) {
        b"TOUCHED\r\n"
    } else {
        b"NOT_FOUND\r\n"
    });
}

/// `flush_all [DELAY] [noreply]`.
fn flush_all(shared: &Shared, args: &[&[u8]], noreply: bool, reply: &mut Vec<u8>) {
    let delay = match &args[..args.len() - usize::from(noreply)] {
        [] => Some(0),
        [delay] => number::<i32>(delay),
        _ => None,
    };
    let Some(delay) = delay else {
        reply.extend_from_slice(b"CLIENT_ERROR invalid exptime argument\r\n");
        return;
    };
    shared.store.flush(i64::from(delay));
    reply.extend_from_slice(b"OK\r\n");
}

/// `verbosity LEVEL [noreply]`.
fn verbosity(shared: &Shared, args: &[&[u8]], noreply: bool, reply: &mut Vec<u8>) {
    let level = match &args[..args.len() - usize::from(noreply)] {
        [level] => number::<u32>(level),
        // `verbosity noreply`: memcached takes it (with no reply).
        [] if noreply => Some(0),
        _ => {
            reply.extend_from_slice(b"ERROR\r\n");
            return;
        }
    };
    match level {
        Some(level) => {
            // Relaxed: a lone setting.
            shared.verbosity.store(level, Ordering::Relaxed);
            reply.extend_from_slice(b"OK\r\n");
        }
        None => reply.extend_from_slice(BAD_FORMAT),
    }
}

/// `stats` (the general counters) and `stats reset`.
fn stats(shared: &Shared, args: &[&[u8]], out: &mut Vec<u8>) {
    match args {
        [] => {}
        [b"reset"] => {
            shared.store.reset_stats();
            // Relaxed: counters read on their own.
            shared.total_connections.store(0, Ordering::Relaxed);
            out.extend_from_slice(b"RESET\r\n");
            return;
        }
        _ => {
            out.extend_from_slice(b"ERROR\r\n");
            return;
        }
    }
    let s = shared.store.stats();
    let now = shared.store.now();
    // Relaxed: counters read on their own.
    let lines: [(&str, String); 18] = [
        ("pid", std::process::id().to_string()),
        ("uptime", now.saturating_sub(shared.started).to_string()),
        ("time", now.to_string()),
        ("version", VERSION.to_string()),
        ("pointer_size", (usize::BITS).to_string()),
        (
            "curr_connections",
            shared.curr_connections.load(Ordering::Relaxed).to_string(),
        ),
        (
            "total_connections",
            shared.total_connections.load(Ordering::Relaxed).to_string(),
        ),
        ("cmd_get", s.cmd_get.to_string()),
        ("cmd_set", s.cmd_set.to_string()),
        ("get_hits", s.get_hits.to_string()),
        ("get_misses", (s.cmd_get - s.get_hits).to_string()),
        ("get_expired", s.expired.to_string()),
        ("curr_items", s.curr_items.to_string()),
        ("total_items", s.total_items.to_string()),
        ("bytes", s.bytes.to_string()),
        ("evictions", s.evictions.to_string()),
        ("limit_maxbytes", shared.store.memory_limit().to_string()),
        ("threads", shared.processors.to_string()),
    ];
    for (name, value) in lines {
        let _ = write!(out, "STAT {name} {value}\r\n");
    }
    out.extend_from_slice(b"END\r\n");
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Session, Shared, KEY_MAX, LINE_MAX};
    use crate::store::{Config, ManualClock, Store};

    /// A Unix time past the 30 days that separate relative exptimes from
    /// absolute ones.
    const NOW: u64 = 1_700_000_000;

    fn server(config: Config) -> (Shared, Arc<ManualClock>) {
        let clock = ManualClock::new(NOW);
        (Shared::new(Store::new(config, clock.clone()), 1), clock)
    }

    /// Feeds `input` to a fresh session in one piece; the replies, and
    /// whether the connection is to close. Every byte must be used.
    fn run(shared: &Shared, input: &[u8]) -> (String, bool) {
        let mut out = Vec::new();
        let done = Session::new().execute(shared, input, &mut out);
        assert_eq!(done.consumed, input.len(), "left over in {input:?}");
        (String::from_utf8(out).unwrap(), done.close)
    }

    fn reply(shared: &Shared, input: &str) -> String {
        run(shared, input.as_bytes()).0
    }

    #[test]
    fn storage_commands_and_their_conditions() {
        let (s, _) = server(Config::default());
        assert_eq!(reply(&s, "add k 5 0 1\r\na\r\n"), "STORED\r\n");
        assert_eq!(reply(&s, "add k 0 0 1\r\nb\r\n"), "NOT_STORED\r\n");
        assert_eq!(
            reply(&s, "replace nothing 0 0 1\r\nb\r\n"),
            "NOT_STORED\r\n"
        );
        assert_eq!(reply(&s, "append nothing 0 0 1\r\nb\r\n"), "NOT_STORED\r\n");
        assert_eq!(reply(&s, "append k 9 0 2\r\nbc\r\n"), "STORED\r\n");
        assert_eq!(reply(&s, "prepend k 9 0 1\r\n_\r\n"), "STORED\r\n");
        // Appending keeps the flags (5) it had.
        assert_eq!(reply(&s, "get k\r\n"), "VALUE k 5 4\r\n_abc\r\nEND\r\n");
        assert_eq!(reply(&s, "replace k 7 0 3\r\nxyz\r\n"), "STORED\r\n");
        assert_eq!(reply(&s, "set k 8 0 0\r\n\r\n"), "STORED\r\n");
        assert_eq!(reply(&s, "get k\r\n"), "VALUE k 8 0\r\n\r\nEND\r\n");
    }

    #[test]
    fn get_takes_many_keys_and_skips_the_missing() {
        let (s, _) = server(Config::default());
        reply(&s, "set a 1 0 1\r\nA\r\nset c 3 0 1\r\nC\r\n");
        assert_eq!(
            reply(&s, "get a b c\r\n"),
            "VALUE a 1 1\r\nA\r\nVALUE c 3 1\r\nC\r\nEND\r\n"
        );
        assert_eq!(reply(&s, "get\r\n"), "ERROR\r\n");
        assert_eq!(reply(&s, "gets\r\n"), "ERROR\r\n");
    }

    /// The cas version in a `gets` reply's `VALUE` line.
    fn cas_of(shared: &Shared, key: &str) -> u64 {
        let r = reply(shared, &format!("gets {key}\r\n"));
        r.lines()
            .next()
            .unwrap()
            .split(' ')
            .nth(4)
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn cas_stores_only_over_the_version_it_names() {
        let (s, _) = server(Config::default());
        assert_eq!(reply(&s, "cas k 0 0 1 1\r\na\r\n"), "NOT_FOUND\r\n");
        reply(&s, "set k 0 0 1\r\na\r\n");
        let v = cas_of(&s, "k");
        reply(&s, "set other 0 0 1\r\na\r\n");
        assert_ne!(cas_of(&s, "other"), v, "versions are unique");
        assert_eq!(
            reply(&s, &format!("cas k 0 0 1 {v}\r\nb\r\n")),
            "STORED\r\n"
        );
        // The version moved on with the store: the same cas now conflicts.
        assert_eq!(
            reply(&s, &format!("cas k 0 0 1 {v}\r\nc\r\n")),
            "EXISTS\r\n"
        );
        assert_eq!(reply(&s, "get k\r\n"), "VALUE k 0 1\r\nb\r\nEND\r\n");
        assert_eq!(
            reply(&s, "cas k 0 0 1 x\r\nc\r\n").lines().next(),
            Some("CLIENT_ERROR bad command line format")
        );
    }

    #[test]
    fn noreply_silences_the_reply_only() {
        let (s, _) = server(Config::default());
        let input = "set k 0 0 1 noreply\r\n1\r\nadd k 0 0 1 noreply\r\n2\r\nincr k 5 noreply\r\n\
                     touch k 100 noreply\r\ndelete nothing noreply\r\nflush_all 0 noreply\r\n\
                     verbosity 1 noreply\r\nset k 0 0 1 noreply\r\n3\r\nget k\r\n";
        assert_eq!(reply(&s, input), "VALUE k 0 1\r\n3\r\nEND\r\n");
    }

    #[test]
    fn incr_and_decr() {
        let (s, _) = server(Config::default());
        reply(&s, "set n 0 0 2\r\n10\r\nset t 0 0 3\r\nabc\r\n");
        assert_eq!(reply(&s, "incr n 5\r\n"), "15\r\n");
        assert_eq!(reply(&s, "decr n 100\r\n"), "0\r\n");
        reply(&s, "set n 0 0 20\r\n18446744073709551615\r\n");
        assert_eq!(reply(&s, "incr n 2\r\n"), "1\r\n", "wraps at 2^64");
        assert_eq!(reply(&s, "incr nothing 1\r\n"), "NOT_FOUND\r\n");
        assert_eq!(
            reply(&s, "incr t 1\r\n"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        );
        assert_eq!(
            reply(&s, "incr n -1\r\n"),
            "CLIENT_ERROR invalid numeric delta argument\r\n"
        );
        assert_eq!(reply(&s, "incr n\r\n"), "ERROR\r\n");
        // As memcached: a shorter result is padded to the value's length.
        assert_eq!(
            reply(&s, "get n\r\n"),
            format!("VALUE n 0 20\r\n1{}\r\nEND\r\n", " ".repeat(19))
        );
    }

    #[test]
    fn delete_touch_version_verbosity_quit() {
        let (s, _) = server(Config::default());
        reply(&s, "set k 0 0 1\r\na\r\n");
        assert_eq!(reply(&s, "touch k 10\r\n"), "TOUCHED\r\n");
        assert_eq!(reply(&s, "touch nothing 10\r\n"), "NOT_FOUND\r\n");
        assert_eq!(
            reply(&s, "touch k soon\r\n"),
            "CLIENT_ERROR invalid exptime argument\r\n"
        );
        assert_eq!(reply(&s, "delete\r\n"), "ERROR\r\n");
        assert_eq!(reply(&s, "delete a b c d e\r\n"), "ERROR\r\n");
        assert!(reply(&s, "delete k 1\r\n").starts_with("CLIENT_ERROR bad command line format"));
        assert_eq!(reply(&s, "delete k 0\r\n"), "DELETED\r\n");
        assert_eq!(reply(&s, "delete k\r\n"), "NOT_FOUND\r\n");
        assert!(reply(&s, "version\r\n").starts_with("VERSION 1.6"));
        assert_eq!(reply(&s, "verbosity 1\r\n"), "OK\r\n");
        assert_eq!(reply(&s, "verbosity\r\n"), "ERROR\r\n");
        assert_eq!(reply(&s, "verbosity foo bar my\r\n"), "ERROR\r\n");
        assert_eq!(reply(&s, "bogus\r\n"), "ERROR\r\n");
        assert_eq!(reply(&s, "\r\n"), "ERROR\r\n");
        // quit: nothing after it runs.
        let mut out = Vec::new();
        let done = Session::new().execute(&s, b"quit\r\nversion\r\n", &mut out);
        assert!(done.close);
        assert_eq!(done.consumed, 6);
        assert!(out.is_empty());
    }

    #[test]
    fn keys_over_250_bytes_are_refused() {
        let (s, _) = server(Config::default());
        let long = "k".repeat(KEY_MAX + 1);
        let fits = "k".repeat(KEY_MAX);
        let bad = "CLIENT_ERROR bad command line format\r\n";
        assert_eq!(reply(&s, &format!("get {long}\r\n")), bad);
        assert_eq!(reply(&s, &format!("get a {long}\r\n")), bad);
        // The refused set's value is then read as a command.
        assert_eq!(
            reply(&s, &format!("set {long} 0 0 1\r\na\r\n")),
            format!("{bad}ERROR\r\n")
        );
        assert_eq!(
            reply(&s, &format!("set {fits} 0 0 1\r\na\r\n")),
            "STORED\r\n"
        );
        assert_eq!(reply(&s, &format!("delete {long}\r\n")), bad);
        assert_eq!(reply(&s, &format!("incr {long} 1\r\n")), bad);
    }

    #[test]
    fn malformed_storage_commands() {
        let (s, _) = server(Config::default());
        let bad = "CLIENT_ERROR bad command line format\r\n";
        assert_eq!(reply(&s, "set k x 0 1\r\n"), bad);
        assert_eq!(reply(&s, "set k 0 0 -1\r\n"), bad);
        assert_eq!(reply(&s, "set k 0 0 99999999999\r\n"), bad);
        assert_eq!(reply(&s, "set k 0 0\r\n"), "ERROR\r\n");
        // A value longer than announced: the chunk is refused, what follows
        // its announced end is read as commands.
        assert_eq!(
            reply(&s, "set k 0 0 1\r\nabc\r\n"),
            "CLIENT_ERROR bad data chunk\r\nERROR\r\n"
        );
        assert_eq!(reply(&s, "get k\r\n"), "END\r\n");
    }

    #[test]
    fn values_over_the_item_size_limit_are_refused_and_skipped() {
        let (s, _) = server(Config {
            item_size_max: 10,
            ..Config::default()
        });
        reply(&s, "set k 0 0 1\r\na\r\n");
        let value = "v".repeat(11);
        assert_eq!(
            reply(&s, &format!("set k 0 0 11\r\n{value}\r\nget k\r\n")),
            // The failed set leaves no stale value behind (as memcached).
            "SERVER_ERROR object too large for cache\r\nEND\r\n"
        );
        // Skipped across two inputs too.
        let mut session = Session::new();
        let mut out = Vec::new();
        let first = session.execute(&s, b"set k 0 0 11\r\nvvvv", &mut out);
        assert_eq!(first.consumed, 18);
        assert!(session.mid_command());
        let second = session.execute(&s, b"vvvvvvv\r\nversion\r\n", &mut out);
        assert_eq!(second.consumed, 18);
        assert!(!session.mid_command());
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("SERVER_ERROR object too large for cache\r\nVERSION "),
            "{out}"
        );
    }

    #[test]
    fn a_command_split_across_reads_waits_for_its_end() {
        let (s, _) = server(Config::default());
        let mut session = Session::new();
        let mut out = Vec::new();
        let whole = b"set k 0 0 5\r\nhello\r\nget k\r\n";
        for cut in 0..whole.len() {
            out.clear();
            let first = session.execute(&s, &whole[..cut], &mut out);
            let mut rest = whole[first.consumed..cut].to_vec();
            rest.extend_from_slice(&whole[cut..]);
            let second = session.execute(&s, &rest, &mut out);
            assert_eq!(second.consumed, rest.len(), "cut at {cut}");
            assert_eq!(
                out, b"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n",
                "cut at {cut}"
            );
        }
        // Waiting for a value, the session says how much it needs.
        let waiting = session.execute(&s, b"set k 0 0 100\r\nab", &mut out);
        assert_eq!((waiting.consumed, waiting.wanted), (0, 15 + 102));
    }

    #[test]
    fn a_line_too_long_closes_the_connection() {
        let (s, _) = server(Config::default());
        let (out, close) = run(&s, "x".repeat(LINE_MAX + 1).as_bytes());
        assert_eq!(out, "CLIENT_ERROR line too long\r\n");
        assert!(close);
    }

    #[test]
    fn expiry_relative_absolute_and_negative() {
        let (s, clock) = server(Config::default());
        let absolute = NOW + 100;
        reply(
            &s,
            &format!(
                "set rel 0 10 1\r\na\r\nset abs 0 {absolute} 1\r\nb\r\nset never 0 0 1\r\nc\r\n\
                 set past 0 {} 1\r\nd\r\nset neg 0 -1 1\r\ne\r\n",
                NOW - 5
            ),
        );
        assert_eq!(reply(&s, "get past neg\r\n"), "END\r\n");
        clock.advance(9);
        assert_eq!(reply(&s, "get rel\r\n"), "VALUE rel 0 1\r\na\r\nEND\r\n");
        clock.advance(1);
        assert_eq!(reply(&s, "get rel\r\n"), "END\r\n");
        // An expired item is gone for add and replace too.
        assert_eq!(reply(&s, "replace rel 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
        assert_eq!(reply(&s, "get abs\r\n"), "VALUE abs 0 1\r\nb\r\nEND\r\n");
        clock.advance(90);
        assert_eq!(
            reply(&s, "get abs never\r\n"),
            "VALUE never 0 1\r\nc\r\nEND\r\n"
        );
        // touch moves the expiry; a negative one expires the item.
        assert_eq!(reply(&s, "touch never 5\r\n"), "TOUCHED\r\n");
        clock.advance(5);
        assert_eq!(reply(&s, "get never\r\n"), "END\r\n");
        reply(&s, "set k 0 0 1\r\na\r\n");
        assert_eq!(reply(&s, "touch k -1\r\n"), "TOUCHED\r\n");
        assert_eq!(reply(&s, "get k\r\n"), "END\r\n");
    }

    #[test]
    fn flush_all_now_and_later() {
        let (s, clock) = server(Config::default());
        reply(&s, "set a 0 0 1\r\na\r\n");
        assert_eq!(reply(&s, "flush_all\r\n"), "OK\r\n");
        assert_eq!(reply(&s, "get a\r\n"), "END\r\n");
        reply(&s, "set a 0 0 1\r\na\r\n");
        assert_eq!(reply(&s, "flush_all 10\r\n"), "OK\r\n");
        clock.advance(9);
        assert_eq!(reply(&s, "get a\r\n"), "VALUE a 0 1\r\na\r\nEND\r\n");
        clock.advance(1);
        assert_eq!(reply(&s, "get a\r\n"), "END\r\n");
        // Items stored after the flush took effect stay.
        reply(&s, "set b 0 0 1\r\nb\r\n");
        assert_eq!(reply(&s, "get b\r\n"), "VALUE b 0 1\r\nb\r\nEND\r\n");
        assert_eq!(
            reply(&s, "flush_all soon\r\n"),
            "CLIENT_ERROR invalid exptime argument\r\n"
        );
    }

    #[test]
    fn stats_reports_the_counters() {
        let (s, _) = server(Config::default());
        reply(&s, "set a 0 0 1\r\na\r\nget a b\r\n");
        let stats = reply(&s, "stats\r\n");
        assert!(stats.ends_with("END\r\n"), "{stats}");
        for line in [
            "STAT cmd_get 2\r\n",
            "STAT get_hits 1\r\n",
            "STAT get_misses 1\r\n",
            "STAT curr_items 1\r\n",
            "STAT cmd_set 1\r\n",
        ] {
            assert!(stats.contains(line), "{line:?} not in {stats}");
        }
        assert_eq!(reply(&s, "stats noreply\r\n"), "ERROR\r\n");
        assert_eq!(reply(&s, "stats reset\r\n"), "RESET\r\n");
        assert!(reply(&s, "stats\r\n").contains("STAT cmd_get 0\r\n"));
    }
}
