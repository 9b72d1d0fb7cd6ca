//! The commands: how each reads its words and what it replies, as
//! memcached 1.6 does (its `proto_text.c`): the word counts it accepts
//! (`ERROR` otherwise, never silenced), then `noreply` as the last word,
//! then the words themselves.

use std::sync::atomic::Ordering;

use super::replies::Sink;
use super::{Session, Shared, Step, KEY_MAX, VERSION};
use crate::number::{strtol, strtoul, strtoull};
use crate::store::{Counted, Mode, Stored};

const ERROR: &[u8] = b"ERROR\r\n";
const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";

/// Words kept after the command's name: more than any command but the
/// gets takes (`cas` with `noreply` has 6).
const ARGS: usize = 8;

impl Session {
    /// Runs the command on `line` (`head` bytes with its end), whose value,
    /// if it has one, starts `data`.
    pub(super) fn command<S: Sink>(
        &mut self,
        shared: &Shared,
        line: &[u8],
        head: usize,
        data: &[u8],
        out: &mut S,
    ) -> Step {
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        let name = words.next().unwrap_or_default();
        if name.len() < 2 {
            out.put(ERROR);
            return Step::Done(0);
        }
        match name {
            b"get" | b"bget" | b"gets" => {
                if words.clone().next().is_none() {
                    out.put(ERROR);
                    return Step::Done(0);
                }
                return self.get(shared, words, name == b"gets", None, out);
            }
            b"gat" | b"gats" => {
                let Some(exptime) = words.next() else {
                    out.put(ERROR);
                    return Step::Done(0);
                };
                let Some(exptime) = strtol(exptime) else {
                    out.put(BAD_EXPTIME);
                    return Step::Done(0);
                };
                let touch = Some(i64::from(exptime));
                return self.get(shared, words, name == b"gats", touch, out);
            }
            _ => {}
        }
        let mut args: [&[u8]; ARGS] = [&[]; ARGS];
        let mut n = 0;
        let mut last = name;
        for word in words {
            if n < ARGS {
                args[n] = word;
            }
            n += 1;
            last = word;
        }
        let args = &args[..n.min(ARGS)];
        // The argument counts each command takes, and whether it looks for
        // `noreply` (after the count was found right).
        let (counts, takes_noreply) = match name {
            b"set" | b"add" | b"replace" | b"append" | b"prepend" => (4..=5, true),
            b"cas" => (5..=6, true),
            b"incr" | b"decr" | b"touch" => (2..=3, true),
            b"delete" => (1..=3, n >= 2),
            b"verbosity" => (1..=2, true),
            b"flush_all" => (0..=2, true),
            b"version" | b"quit" | b"stats" => (0..=usize::MAX, false),
            _ => {
                // memcached closes on what looks like HTTP, unless the name
                // starts as its own commands do.
                let own = b"gsacidt".contains(&name[0]) || (name[0] == b'm' && name.len() == 2);
                if !own && last.starts_with(b"HTTP/") {
                    return Step::Close;
                }
                out.put(ERROR);
                return Step::Done(0);
            }
        };
        if !counts.contains(&n) {
            out.put(ERROR);
            return Step::Done(0);
        }
        let noreply = takes_noreply && last == b"noreply";
        let mark = out.mark();
        let step = match name {
            b"set" => self.storage(shared, Some(Mode::Set), args, head, data, out),
            b"add" => self.storage(shared, Some(Mode::Add), args, head, data, out),
            b"replace" => self.storage(shared, Some(Mode::Replace), args, head, data, out),
            b"append" => self.storage(shared, Some(Mode::Append), args, head, data, out),
            b"prepend" => self.storage(shared, Some(Mode::Prepend), args, head, data, out),
            b"cas" => self.storage(shared, None, args, head, data, out),
            b"delete" => delete(shared, args, out),
            b"incr" | b"decr" => count(shared, args, name == b"incr", out),
            b"touch" => touch(shared, args, out),
            b"verbosity" => verbosity(shared, args, out),
            b"flush_all" => flush_all(shared, args, noreply, out),
            b"version" => {
                out.put_fmt(format_args!("VERSION {VERSION}\r\n"));
                Step::Done(0)
            }
            b"stats" => stats(shared, args, out),
            _ => Step::Close,
        };
        if noreply {
            out.truncate(mark);
        }
        step
    }

    /// get/gets (`with_cas`), or gat/gats (`touch`): the values of `keys`,
    /// from the first not yet answered; paused at the replies' high-water
    /// mark.
    fn get<'a, S: Sink>(
        &mut self,
        shared: &Shared,
        keys: impl Iterator<Item = &'a [u8]> + Clone,
        with_cas: bool,
        touch: Option<i64>,
        out: &mut S,
    ) -> Step {
        // A key too long ends the command with an error in place of the
        // values before it (as memcached: it looks them up, and touches
        // them for gat, but drops its replies).
        if self.keys_done == 0 {
            if let Some(bad) = keys.clone().position(|key| key.len() > KEY_MAX) {
                for key in keys.take(bad) {
                    shared.store.get_touch(key, touch, |_| ());
                }
                out.put(BAD_FORMAT);
                return Step::Done(0);
            }
        }
        for (i, key) in keys.enumerate().skip(self.keys_done) {
            if out.full() {
                self.keys_done = i;
                return Step::Paused;
            }
            shared.store.get_touch(key, touch, |item| {
                out.put(b"VALUE ");
                out.put(key);
                if with_cas {
                    out.put_fmt(format_args!(
                        " {} {} {}\r\n",
                        item.flags,
                        item.value.len(),
                        item.cas
                    ));
                } else {
                    out.put_fmt(format_args!(" {} {}\r\n", item.flags, item.value.len()));
                }
                out.put_value(&item.value);
                out.put(b"\r\n");
            });
        }
        out.put(b"END\r\n");
        Step::Done(0)
    }

    /// set/add/replace/append/prepend (`mode`), or cas (`None`):
    /// `KEY FLAGS EXPTIME BYTES [CAS] [noreply]`, then the value.
    fn storage<S: Sink>(
        &mut self,
        shared: &Shared,
        mode: Option<Mode>,
        args: &[&[u8]],
        head: usize,
        data: &[u8],
        out: &mut S,
    ) -> Step {
        let key = args[0];
        if key.len() > KEY_MAX {
            out.put(BAD_FORMAT);
            return Step::Done(0);
        }
        let parsed = (
            strtoul(args[1]),
            strtol(args[2]),
            strtol(args[3]),
            match mode {
                Some(mode) => Some(mode),
                None => strtoull(args[4]).map(Mode::Cas),
            },
        );
        let (Some(flags), Some(exptime), Some(bytes), Some(mode)) = parsed else {
            out.put(BAD_FORMAT);
            return Step::Done(0);
        };
        let Ok(bytes) = usize::try_from(bytes) else {
            out.put(BAD_FORMAT);
            return Step::Done(0);
        };
        if bytes > i32::MAX as usize - 2 {
            out.put(BAD_FORMAT);
            return Step::Done(0);
        }
        let refused: &[u8] = if shared.store.too_large(key.len(), flags, bytes) {
            b"SERVER_ERROR object too large for cache\r\n"
        } else if data.len() < bytes + 2 && !self.room_for(shared, head + bytes + 2) {
            b"SERVER_ERROR out of memory storing object\r\n"
        } else if data.len() < bytes + 2 {
            return Step::NeedData(bytes + 2);
        } else {
            b""
        };
        if !refused.is_empty() {
            out.put(refused);
            // As memcached: a set that fails leaves no stale value behind.
            if mode == Mode::Set {
                shared.store.delete(key);
            }
            return Step::Swallow(bytes + 2);
        }
        if &data[bytes..bytes + 2] != b"\r\n" {
            out.put(b"CLIENT_ERROR bad data chunk\r\n");
            return Step::Done(bytes + 2);
        }
        // The room reserved for the value goes before the item is charged.
        self.reserved = None;
        let stored = shared
            .store
            .store(mode, key, flags, i64::from(exptime), &data[..bytes]);
        out.put(match stored {
            Stored::Stored => b"STORED\r\n",
            Stored::NotStored => b"NOT_STORED\r\n",
            Stored::Exists => b"EXISTS\r\n",
            Stored::NotFound => b"NOT_FOUND\r\n",
            Stored::OutOfMemory => b"SERVER_ERROR out of memory storing object\r\n",
        });
        Step::Done(bytes + 2)
    }
}

/// `delete KEY [0] [noreply]` (the 0 is an old form of the command).
fn delete<S: Sink>(shared: &Shared, args: &[&[u8]], out: &mut S) -> Step {
    if args.len() > 1 {
        let zero = args[1] == b"0";
        let noreply = args.last() == Some(&&b"noreply"[..]);
        let valid = match args.len() {
            2 => zero || noreply,
            _ => zero && noreply,
        };
        if !valid {
            out.put(b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
            return Step::Done(0);
        }
    }
    if args[0].len() > KEY_MAX {
        out.put(BAD_FORMAT);
    } else if shared.store.delete(args[0]) {
        out.put(b"DELETED\r\n");
    } else {
        out.put(b"NOT_FOUND\r\n");
    }
    Step::Done(0)
}

/// `incr|decr KEY DELTA [noreply]`.
fn count<S: Sink>(shared: &Shared, args: &[&[u8]], increment: bool, out: &mut S) -> Step {
    if args[0].len() > KEY_MAX {
        out.put(BAD_FORMAT);
        return Step::Done(0);
    }
    let Some(delta) = strtoull(args[1]) else {
        out.put(b"CLIENT_ERROR invalid numeric delta argument\r\n");
        return Step::Done(0);
    };
    match shared.store.count(args[0], delta, increment) {
        Counted::Value(v) => out.put_fmt(format_args!("{v}\r\n")),
        Counted::NotFound => out.put(b"NOT_FOUND\r\n"),
        Counted::NotANumber => {
            out.put(b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
        }
    }
    Step::Done(0)
}

/// `touch KEY EXPTIME [noreply]`.
fn touch<S: Sink>(shared: &Shared, args: &[&[u8]], out: &mut S) -> Step {
    if args[0].len() > KEY_MAX {
        out.put(BAD_FORMAT);
        return Step::Done(0);
    }
    let Some(exptime) = strtol(args[1]) else {
        out.put(BAD_EXPTIME);
        return Step::Done(0);
    };
    out.put(if shared.store.touch(args[0], i64::from(exptime)) {
        b"TOUCHED\r\n"
    } else {
        b"NOT_FOUND\r\n"
    });
    Step::Done(0)
}

/// `flush_all [DELAY] [noreply]`.
fn flush_all<S: Sink>(shared: &Shared, args: &[&[u8]], noreply: bool, out: &mut S) -> Step {
    let delay = if args.len() == usize::from(noreply) {
        0
    } else {
        match strtol(args[0]) {
            Some(delay) => delay,
            None => {
                out.put(BAD_EXPTIME);
                return Step::Done(0);
            }
        }
    };
    shared.store.flush(i64::from(delay));
    out.put(b"OK\r\n");
    Step::Done(0)
}

/// `verbosity LEVEL [noreply]`.
fn verbosity<S: Sink>(shared: &Shared, args: &[&[u8]], out: &mut S) -> Step {
    match strtoul(args[0]) {
        Some(level) => {
            // Relaxed: a lone setting.
            shared.verbosity.store(level, Ordering::Relaxed);
            out.put(b"OK\r\n");
        }
        None => out.put(BAD_FORMAT),
    }
    Step::Done(0)
}

/// `stats` (the general counters) and `stats reset`.
fn stats<S: Sink>(shared: &Shared, args: &[&[u8]], out: &mut S) -> Step {
    match args.first() {
        None => {}
        Some(&b"reset") => {
            shared.store.reset_stats();
            // Relaxed: counters read on their own.
            shared.total_connections.store(0, Ordering::Relaxed);
            shared.rejected_connections.store(0, Ordering::Relaxed);
            out.put(b"RESET\r\n");
            return Step::Done(0);
        }
        Some(_) => {
            out.put(ERROR);
            return Step::Done(0);
        }
    }
    let s = shared.store.stats();
    let now = shared.store.now();
    // Relaxed: counters read on their own.
    let counter = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    // In memcached's order.
    let first: [(&str, u64); 3] = [
        ("pid", u64::from(std::process::id())),
        ("uptime", now.saturating_sub(shared.started)),
        ("time", now),
    ];
    let rest: [(&str, u64); 20] = [
        ("pointer_size", u64::from(usize::BITS)),
        ("max_connections", shared.max_connections as u64),
        ("curr_connections", counter(&shared.curr_connections)),
        ("total_connections", counter(&shared.total_connections)),
        (
            "rejected_connections",
            counter(&shared.rejected_connections),
        ),
        ("cmd_get", s.cmd_get),
        ("cmd_set", s.cmd_set),
        ("cmd_touch", s.cmd_touch),
        ("get_hits", s.get_hits),
        ("get_misses", s.cmd_get - s.get_hits),
        ("get_expired", s.expired),
        ("touch_hits", s.touch_hits),
        ("touch_misses", s.cmd_touch - s.touch_hits),
        ("limit_maxbytes", shared.store.memory_limit() as u64),
        ("threads", shared.processors as u64),
        ("bytes", s.bytes),
        ("curr_items", s.curr_items),
        ("total_items", s.total_items),
        ("evictions", s.evictions),
        ("reserved_bytes", s.reserved + s.pinned),
    ];
    for (name, value) in first {
        out.put_fmt(format_args!("STAT {name} {value}\r\n"));
    }
    out.put_fmt(format_args!("STAT version {VERSION}\r\n"));
    for (name, value) in rest {
        out.put_fmt(format_args!("STAT {name} {value}\r\n"));
    }
    out.put(b"END\r\n");
    Step::Done(0)
}
