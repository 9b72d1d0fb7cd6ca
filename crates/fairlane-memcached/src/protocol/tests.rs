use std::sync::Arc;

use super::{
    Replies, Session, Shared, GET_LINE_MAX, KEY_MAX, LINE_MAX, READ_BUFFER, SHARE_MIN, VERSION,
};
use crate::store::{Config, ManualClock, Store, ITEM_HEADER};

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
    assert_eq!(reply(&s, "set k 0 0 9223372036854775808\r\n"), bad);
    assert_eq!(reply(&s, "set k 0 0 2147483647\r\n"), bad);
    assert_eq!(reply(&s, "set k 0 0\r\n"), "ERROR\r\n");
    // As memcached, a length is read as a C long kept to 32 bits: this one
    // is 1,215,752,191 bytes, too large (and its bytes to be skipped).
    let mut out = Vec::new();
    let mut session = Session::new();
    session.execute(&s, b"set k 0 0 99999999999\r\n", &mut out);
    assert_eq!(out, b"SERVER_ERROR object too large for cache\r\n");
    assert!(session.mid_command());
    // Flags are kept to 32 bits too.
    assert_eq!(
        reply(&s, "set f 4294967297 0 1\r\na\r\nget f\r\n"),
        "STORED\r\nVALUE f 1 1\r\na\r\nEND\r\n"
    );
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
    // As memcached: silently, past 2048 bytes without an end...
    let (out, close) = run(&s, "x".repeat(LINE_MAX + 1).as_bytes());
    assert_eq!((out.as_str(), close), ("", true));
    let (out, close) = run(&s, format!("set {}", "k".repeat(LINE_MAX)).as_bytes());
    assert_eq!((out.as_str(), close), ("", true));
    // ... unless it is a get, which may grow (with room reserved for it)
    // up to its own limit.
    let mut session = Session::new();
    let mut out = Vec::new();
    let long = format!("get {}", "k ".repeat(READ_BUFFER));
    let done = session.execute(&s, long.as_bytes(), &mut out);
    assert_eq!((done.consumed, done.close), (0, false));
    assert!(done.wanted > long.len());
    assert!(s.store.stats().reserved >= done.wanted as u64);
    let done = session.execute(&s, format!("{long}\r\n").as_bytes(), &mut out);
    assert_eq!(out, b"END\r\n");
    assert!(!done.close);
    assert_eq!(s.store.stats().reserved, 0, "given back once the line ran");
    let huge = format!("get {}", "k ".repeat(GET_LINE_MAX / 2));
    let (out, close) = run(&s, huge.as_bytes());
    assert_eq!(
        (out.as_str(), close),
        ("CLIENT_ERROR line too long\r\n", true)
    );
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

/// A value far larger than a 64th of the memory limit is stored, and the
/// item size limit applies to the whole item, as memcached counts it.
#[test]
fn large_values_are_limited_by_the_item_size_not_a_share_of_memory() {
    let (s, _) = server(Config {
        memory_limit: 8 << 20,
        ..Config::default()
    });
    let value = "v".repeat(200_000);
    assert_eq!(
        reply(&s, &format!("set big 0 0 200000\r\n{value}\r\n")),
        "STORED\r\n"
    );
    let (s, _) = server(Config::default());
    // memcached's largest value under `big` with flags 0: 1 MiB less its
    // 59 bytes of header, less the key.
    let fits = (1 << 20) - ITEM_HEADER - 3;
    for (len, flags, answer) in [
        (fits, 0, "STORED\r\n"),
        (fits + 1, 0, "SERVER_ERROR object too large for cache\r\n"),
        (fits, 1, "SERVER_ERROR object too large for cache\r\n"),
        (1_048_528, 0, "SERVER_ERROR object too large for cache\r\n"),
    ] {
        let value = "v".repeat(len);
        assert_eq!(
            reply(&s, &format!("set big {flags} 0 {len}\r\n{value}\r\n")),
            answer,
            "{len} bytes, flags {flags}"
        );
    }
}

/// As memcached: a set refused (too large, or no memory for its value)
/// removes the item it would have replaced; other commands leave it.
#[test]
fn a_refused_set_removes_the_old_value() {
    let (s, _) = server(Config {
        memory_limit: 1 << 20,
        item_size_max: 512 << 10,
        ..Config::default()
    });
    let too_large = format!("set big 0 0 600000\r\n{}\r\n", "v".repeat(600_000));
    reply(&s, "set big 0 0 3\r\nold\r\n");
    assert_eq!(
        reply(&s, &format!("{too_large}get big\r\n")),
        "SERVER_ERROR object too large for cache\r\nEND\r\n"
    );
    reply(&s, "set big 0 0 3\r\nold\r\n");
    let append = format!("append big 0 0 600000\r\n{}\r\n", "v".repeat(600_000));
    assert_eq!(
        reply(&s, &format!("{append}get big\r\n")),
        "SERVER_ERROR object too large for cache\r\nVALUE big 0 3\r\nold\r\nEND\r\n"
    );
    // No memory for the value: another connection's value still arriving
    // holds most of it.
    let mut first = Session::new();
    let mut out = Vec::new();
    let done = first.execute(&s, b"set a 0 0 500000\r\nxx", &mut out);
    assert!(done.wanted > 500_000 && out.is_empty());
    let mut second = Session::new();
    second.execute(&s, b"set b 0 0 500000\r\nxx", &mut out);
    assert!(out.is_empty());
    let mut third = Session::new();
    third.execute(&s, b"set big 0 0 500000\r\nxx", &mut out);
    assert_eq!(out, b"SERVER_ERROR out of memory storing object\r\n");
    assert!(third.mid_command(), "its value is skipped");
    assert_eq!(reply(&s, "get big\r\n"), "END\r\n");
    assert!(s.store.memory_used() <= 1 << 20);
    drop((first, second));
    assert_eq!(s.store.stats().reserved, 0);
}

#[test]
fn noreply_is_read_only_where_memcached_reads_it() {
    let (s, _) = server(Config::default());
    // A key named noreply.
    assert_eq!(reply(&s, "delete noreply\r\n"), "NOT_FOUND\r\n");
    reply(&s, "set noreply 0 0 1\r\na\r\n");
    assert_eq!(
        reply(&s, "get noreply\r\n"),
        "VALUE noreply 0 1\r\na\r\nEND\r\n"
    );
    assert_eq!(reply(&s, "delete noreply 0\r\n"), "DELETED\r\n");
    reply(&s, "set noreply 0 0 1\r\na\r\n");
    assert_eq!(
        reply(&s, "delete noreply noreply\r\nget noreply\r\n"),
        "END\r\n"
    );
    assert_eq!(reply(&s, "incr noreply 1\r\n"), "NOT_FOUND\r\n");
    assert_eq!(reply(&s, "touch noreply 1\r\n"), "NOT_FOUND\r\n");
    // The last word, once the word count is right: errors are silenced
    // too, a wrong count is not.
    assert_eq!(reply(&s, "set k 0 0 noreply\r\n"), "");
    assert_eq!(reply(&s, "set k 0 noreply\r\n"), "ERROR\r\n");
    assert_eq!(reply(&s, "incr k noreply\r\n"), "");
    assert_eq!(reply(&s, "verbosity noreply\r\n"), "");
    assert_eq!(reply(&s, "flush_all noreply\r\n"), "");
    assert_eq!(reply(&s, "stats noreply\r\n"), "ERROR\r\n");
    // Other words where memcached ignores them.
    assert_eq!(reply(&s, "verbosity 1 2\r\n"), "OK\r\n");
    assert_eq!(reply(&s, "flush_all 0 20\r\n"), "OK\r\n");
    assert_eq!(
        reply(&s, "flush_all noreply 0\r\n"),
        "CLIENT_ERROR invalid exptime argument\r\n"
    );
    assert_eq!(reply(&s, "stats reset now\r\n"), "RESET\r\n");
}

#[test]
fn gat_and_gats_get_and_touch() {
    let (s, clock) = server(Config::default());
    reply(&s, "set a 1 10 1\r\nA\r\nset b 2 10 1\r\nB\r\n");
    assert_eq!(
        reply(&s, "gat 100 a nothing b\r\n"),
        "VALUE a 1 1\r\nA\r\nVALUE b 2 1\r\nB\r\nEND\r\n"
    );
    clock.advance(50);
    let gats = reply(&s, "gats 0 a\r\n");
    assert!(gats.starts_with("VALUE a 1 1 "), "{gats}");
    clock.advance(100);
    // a was made to live for ever, b for 100 s.
    assert_eq!(reply(&s, "get a b\r\n"), "VALUE a 1 1\r\nA\r\nEND\r\n");
    assert_eq!(reply(&s, "gat 10\r\n"), "END\r\n");
    assert_eq!(reply(&s, "gat\r\n"), "ERROR\r\n");
    assert_eq!(
        reply(&s, "gat soon a\r\n"),
        "CLIENT_ERROR invalid exptime argument\r\n"
    );
    assert_eq!(
        reply(&s, "gat -1 a\r\nget a\r\n"),
        "VALUE a 1 1\r\nA\r\nEND\r\nEND\r\n"
    );
}

#[test]
fn http_requests_close_the_connection() {
    let (s, _) = server(Config::default());
    for request in ["GET / HTTP/1.1\r\n", "POST /x HTTP/1.0\r\n"] {
        let (out, close) = run(&s, request.as_bytes());
        assert_eq!((out.as_str(), close), ("", true), "{request:?}");
    }
    // A command of memcached's own letters is an error, whatever follows.
    assert_eq!(reply(&s, "sx / HTTP/1.1\r\n"), "ERROR\r\n");
    assert_eq!(reply(&s, "mn\r\n"), "ERROR\r\n");
}

/// With a high-water mark, replies wait to be sent once they reach it: a
/// pipeline of gets, and one get of many keys, stop and go on where they
/// stopped; large values are shared, not copied.
#[test]
fn replies_stop_at_their_high_water_mark() {
    let (s, _) = server(Config::default());
    let value = "v".repeat(SHARE_MIN);
    reply(
        &s,
        &format!(
            "set big 0 0 {}\r\n{value}\r\nset small 0 0 1\r\ns\r\n",
            value.len()
        ),
    );
    let one = format!("VALUE big 0 {}\r\n{value}\r\nEND\r\n", value.len());
    let input = format!(
        "{}get small big small\r\nversion\r\n",
        "get big\r\n".repeat(20)
    );
    let mut session = Session::new();
    let mut replies = Replies::new(3 * SHARE_MIN);
    let mut sent = Vec::new();
    let mut rest = input.as_bytes();
    let mut rounds = 0;
    loop {
        let done = session.execute_bounded(&s, rest, &mut replies);
        assert!(replies.len() < replies.bound());
        // Each large value is one piece of its own, shared.
        assert!(replies.parts().any(|p| p.len() == SHARE_MIN) || replies.len() < SHARE_MIN);
        replies.parts().for_each(|p| sent.extend_from_slice(p));
        replies.clear();
        rest = &rest[done.consumed..];
        rounds += 1;
        if !done.paused {
            break;
        }
    }
    assert!(rest.is_empty());
    assert!(rounds >= 20 / 3, "{rounds} rounds");
    let sent = String::from_utf8(sent).unwrap();
    let expected = format!(
        "{}VALUE small 0 1\r\ns\r\nVALUE big 0 {}\r\n{value}\r\nVALUE small 0 1\r\ns\r\nEND\r\nVERSION {VERSION}\r\n",
        one.repeat(20),
        value.len()
    );
    assert!(sent == expected, "the replies differ");
    // The same input through a plain buffer: all at once, the same bytes.
    assert_eq!(reply(&s, &input), expected);
}
