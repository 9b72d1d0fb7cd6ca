//! fairlane-memcached against real memcached: the same seeded sequences of
//! random commands (valid and not: every storage mode, gets of several
//! keys, gat, cas with live and stale versions, incr and decr of odd
//! numbers, noreply everywhere, a key named `noreply`, malformed lines,
//! values at the item size limit) sent to both, the replies compared byte
//! for byte, on both I/O backends, at one and two processors. Skipped with
//! a message where memcached is not installed.
//!
//! Each command is followed by a `version`, whose reply marks where the
//! command's replies end (a `noreply` command has none). Cas versions are
//! renamed in the order they first appear, since the two servers number
//! them differently; a `cas` command uses the version its server last
//! returned for the key.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::net::SocketAddr;

use support::{Client, Memcached, Server};

/// Sequences compared, and commands in each.
const SEEDS: u64 = 40;
const COMMANDS: usize = 250;

/// The servers' limits: memory for every value the sequences store, and a
/// smaller item size limit than the default, so that values at it are
/// cheaper to send (memcached takes no less than its 512 KiB chunks).
const MEMORY_MB: &str = "64";
const ITEM_MAX: usize = 512 * 1024;

#[test]
fn replies_match_real_memcached() {
    let item_max = format!("{}k", ITEM_MAX / 1024);
    let limits = ["-m", MEMORY_MB, "-I", item_max.as_str()];
    let Some(memcached) = Memcached::start(
        "replies_match_real_memcached",
        &[&limits[..], &["-t", "1"]].concat(),
    ) else {
        return;
    };
    let expected: Vec<Vec<Exchange>> = (0..SEEDS).map(|seed| run(memcached.addr, seed)).collect();
    std::thread::scope(|scope| {
        for (backend, processors) in [
            ("io_uring", 1),
            ("fallback", 1),
            ("io_uring", 2),
            ("fallback", 2),
        ] {
            let expected = &expected;
            scope.spawn(move || {
                let server = Server::start_on("127.0.0.1:0", backend, processors, &limits);
                for (seed, expected) in (0..SEEDS).zip(expected) {
                    let got = run(server.addr, seed);
                    compare(
                        &format!("{backend}, {processors} processors, seed {seed}"),
                        expected,
                        &got,
                    );
                }
            });
        }
    });
}

/// One command and its replies (normalised).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Exchange {
    command: Vec<u8>,
    replies: Vec<String>,
}

fn compare(what: &str, expected: &[Exchange], got: &[Exchange]) {
    // The commands differ only in the cas versions they carry.
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        assert!(
            e.replies == g.replies,
            "{what}, command {i}: {}\n memcached: {:?}\n fairlane:  {:?}\nthe commands before it, and memcached's replies:\n{}",
            shown(&e.command),
            e.replies,
            g.replies,
            expected[i.saturating_sub(12)..i]
                .iter()
                .map(|e| format!("  {} -> {:?}\n", shown(&e.command), e.replies))
                .collect::<String>()
        );
    }
}

/// A command as text, long values cut short.
fn shown(command: &[u8]) -> String {
    let text = String::from_utf8_lossy(command);
    if text.len() > 200 {
        format!("{:?}... ({} bytes)", &text[..200], command.len())
    } else {
        format!("{text:?}")
    }
}

/// The sequence of seed `seed` against the server at `addr`, after
/// emptying it.
fn run(addr: SocketAddr, seed: u64) -> Vec<Exchange> {
    let mut c = Conversation {
        client: Client::connect_to(addr),
        cas_names: HashMap::new(),
        last_cas: HashMap::new(),
    };
    c.exchange(b"flush_all\r\n".to_vec());
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    (0..COMMANDS)
        .map(|_| {
            let op = Op::random(&mut rng);
            let command = op.render(&c.last_cas);
            c.exchange(command)
        })
        .collect()
}

/// A connection, and what it saw of the cas versions.
struct Conversation {
    client: Client,
    /// Each version seen, by the order it first appeared.
    cas_names: HashMap<u64, usize>,
    /// The version last seen for each key.
    last_cas: HashMap<String, u64>,
}

impl Conversation {
    /// Sends `command` and a `version`; the replies before the version's.
    fn exchange(&mut self, command: Vec<u8>) -> Exchange {
        // One write, so that the version is not held back behind the
        // command (Nagle's algorithm).
        self.client.send(&[&command[..], b"version\r\n"].concat());
        let mut replies = Vec::new();
        loop {
            let mut line = Vec::new();
            self.client
                .reader
                .read_until(b'\n', &mut line)
                .expect("a reply");
            assert!(
                !line.is_empty(),
                "the server closed after {}",
                shown(&command)
            );
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.starts_with("VERSION ") {
                return Exchange { command, replies };
            }
            let words: Vec<&str> = line.trim_end().split(' ').collect();
            if words[0] != "VALUE" || words.len() < 4 {
                replies.push(line);
                continue;
            }
            let len: usize = words[3].parse().expect("a value's length");
            let mut value = vec![0; len + 2];
            self.client.reader.read_exact(&mut value).expect("a value");
            // memcached writes a shorter incr/decr result over the number,
            // padded with spaces, but only if no other thread holds the
            // item at that moment (its LRU maintainer does now and then);
            // otherwise it stores the digits alone. Trailing spaces are
            // therefore not compared (and the `n` keys that hold numbers
            // are never appended to, which would bury them).
            value.truncate(len);
            while value.last() == Some(&b' ') {
                value.pop();
            }
            let mut normal = format!("VALUE {} {} {}", words[1], words[2], value.len());
            if let Some(cas) = words.get(4).and_then(|c| c.parse::<u64>().ok()) {
                self.last_cas.insert(words[1].to_string(), cas);
                let n = self.cas_names.len();
                let name = *self.cas_names.entry(cas).or_insert(n);
                normal += &format!(" cas#{name}");
            }
            if value.len() > 600 {
                // Its start, its end, and a hash of it all.
                let hash = value.chunks(8).fold(0u64, |h, c| {
                    let mut word = [0; 8];
                    word[..c.len()].copy_from_slice(c);
                    (h ^ u64::from_le_bytes(word)).wrapping_mul(0x100_0000_01b3)
                });
                let (start, end) = (&value[..300], &value[value.len() - 300..]);
                value = [start, format!("..{hash:x}..").as_bytes(), end].concat();
            }
            normal += &format!("\r\n{}\r\n", String::from_utf8_lossy(&value));
            replies.push(normal);
        }
    }
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// One of `choices`.
    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[self.below(choices.len())]
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Where a `cas` command takes its version from.
#[derive(Debug, Clone)]
enum CasFrom {
    /// The one its server last returned for the key (0 if none).
    Last,
    /// These words.
    Text(String),
}

/// A command, before its cas version is known.
#[derive(Debug, Clone)]
enum Op {
    Storage {
        verb: &'static str,
        key: String,
        flags: String,
        exptime: String,
        value: Vec<u8>,
        /// The length announced, if not the value's (shorter: the value
        /// then fails as a bad chunk).
        announced: Option<usize>,
        cas: Option<CasFrom>,
        noreply: bool,
    },
    Line(String),
}

const VERBS: [&str; 5] = ["set", "add", "replace", "append", "prepend"];

/// A key for anything but incr and decr.
fn key(rng: &mut Rng) -> String {
    match rng.below(100) {
        0..=74 => format!("k{}", rng.below(8)),
        75..=79 => format!("n{}", rng.below(3)),
        80..=89 => "noreply".into(),
        90..=94 => "x".repeat(250),
        _ => "x".repeat(251),
    }
}

/// A key for incr and decr: the `n` keys hold numbers (and are never
/// appended to, see [`Conversation::exchange`] for why).
fn number_key(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=7 => format!("n{}", rng.below(3)),
        8 => "nothing".into(),
        _ => "x".repeat(251),
    }
}

fn exptime(rng: &mut Rng) -> String {
    let far = 4_000_000_000u64.to_string();
    rng.pick(&[
        "0", "0", "0", "1000", "100000", "-1", "2592001", &far, "+1000", "x",
    ])
    .into()
}

fn flags(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=5 => "0".into(),
        6 => (rng.next() as u32).to_string(),
        7 => "4294967297".into(),
        8 => "-1".into(),
        _ => rng.pick(&["1", "+3", "abc", "18446744073709551615"]).into(),
    }
}

/// Whether memcached reads these flags and exptime (of those made above).
fn well_formed(flags: &str, exptime: &str) -> bool {
    !matches!(flags, "-1" | "abc") && exptime != "x"
}

fn number(rng: &mut Rng) -> String {
    match rng.below(12) {
        0..=5 => rng.below(1000).to_string(),
        6 => rng.next().to_string(),
        7 => "18446744073709551615".into(),
        _ => rng
            .pick(&["+5", "-0", "-1", "abc", "99999999999999999999", "0x10"])
            .into(),
    }
}

/// A value for a command whose line is `well_formed` or not.
fn value(rng: &mut Rng, key: &str, flags: &str, well_formed: bool) -> Vec<u8> {
    let key_len = key.len();
    if key.starts_with('n') && rng.chance(80) {
        return number_value(rng);
    }
    let len = match rng.below(100) {
        // A line refused makes its value a stream of commands (errors):
        // kept short.
        _ if key_len > 250 || !well_formed => rng.below(100),
        0..=64 => rng.below(20),
        65..=84 => rng.below(5000),
        // At the item size limit, as memcached counts it: 59 bytes of
        // header, 4 of flags other than 0.
        85..=88 => {
            let flag_bytes = if flags == "0" { 0 } else { 4 };
            (ITEM_MAX - 59 - key_len - flag_bytes + 3).saturating_sub(rng.below(7))
        }
        _ => rng.below(5),
    };
    // Random bytes, in a pattern of up to 300 repeated (cheap to make and
    // to compare, however long).
    const BYTES: &[u8] = b"abcxyz0189 \r\n\t\0-+";
    let pattern: Vec<u8> = (0..len.min(300))
        .map(|_| BYTES[rng.below(BYTES.len())])
        .collect();
    pattern.iter().copied().cycle().take(len).collect()
}

/// A number, perhaps with spaces or more after it.
fn number_value(rng: &mut Rng) -> Vec<u8> {
    let digits = number(rng);
    let pad = rng.pick(&["", "", " ", "  ", " x"]);
    format!("{}{digits}{pad}", rng.pick(&["", "", " "])).into_bytes()
}

impl Op {
    fn random(rng: &mut Rng) -> Op {
        let noreply = rng.chance(12);
        let tail = if noreply { " noreply" } else { "" };
        match rng.below(100) {
            0..=29 => {
                let verb = VERBS[rng.below(VERBS.len())];
                let mut key = key(rng);
                if verb.ends_with("pend") && key.starts_with('n') {
                    key.replace_range(..1, "k");
                }
                let (flags, exptime) = (flags(rng), exptime(rng));
                let value = value(rng, &key, &flags, well_formed(&flags, &exptime));
                let announced = (rng.chance(3) && !value.is_empty()).then(|| value.len() - 1);
                Op::Storage {
                    verb,
                    key,
                    flags,
                    exptime,
                    value,
                    announced,
                    cas: None,
                    noreply,
                }
            }
            30..=37 => {
                let key = key(rng);
                let (flags, exptime) = (flags(rng), exptime(rng));
                let cas = match rng.below(10) {
                    0..=6 => CasFrom::Last,
                    7 => CasFrom::Text(rng.next().to_string()),
                    _ => CasFrom::Text(rng.pick(&["0", "abc", "-1"]).into()),
                };
                let cas_ok = !matches!(&cas, CasFrom::Text(t) if t == "abc" || t == "-1");
                let value = value(rng, &key, &flags, cas_ok && well_formed(&flags, &exptime));
                Op::Storage {
                    verb: "cas",
                    key,
                    flags,
                    exptime,
                    value,
                    announced: None,
                    cas: Some(cas),
                    noreply,
                }
            }
            38..=59 => {
                let verb = rng.pick(&["get", "get", "gets", "gat", "gats"]);
                let keys: Vec<String> = (0..1 + rng.below(4)).map(|_| key(rng)).collect();
                let exptime = if verb.starts_with("gat") {
                    format!(" {}", exptime(rng))
                } else {
                    String::new()
                };
                Op::Line(format!("{verb}{exptime} {}", keys.join(" ")))
            }
            60..=67 => {
                let form = rng.pick(&[
                    "",
                    "",
                    " 0",
                    " noreply",
                    " 0 noreply",
                    " 1",
                    " noreply noreply",
                    " 0 0",
                ]);
                Op::Line(format!("delete {}{form}", key(rng)))
            }
            68..=79 => {
                let verb = rng.pick(&["incr", "decr"]);
                Op::Line(format!("{verb} {} {}{tail}", number_key(rng), number(rng)))
            }
            80..=85 => Op::Line(format!("touch {} {}{tail}", key(rng), exptime(rng))),
            86..=87 => Op::Line(
                rng.pick(&[
                    "flush_all",
                    "flush_all 0",
                    "flush_all noreply",
                    "flush_all -1",
                    "flush_all x",
                ])
                .into(),
            ),
            88..=89 => Op::Line(
                rng.pick(&[
                    "verbosity 1",
                    "verbosity 1 noreply",
                    "verbosity x",
                    "verbosity noreply",
                    "verbosity",
                ])
                .into(),
            ),
            _ => Op::Line(
                rng.pick(&[
                    "",
                    "bogus",
                    "g",
                    "get",
                    "gets",
                    "set k0 0 0",
                    "set k0 0 0 1 noreply extra words",
                    "incr k0",
                    "touch k0",
                    "delete",
                    "delete a b c d",
                    "  get k0  k1 ",
                    "GET k0",
                ])
                .into(),
            ),
        }
    }

    /// The command's bytes, given the versions last seen.
    fn render(&self, last_cas: &HashMap<String, u64>) -> Vec<u8> {
        match self {
            Op::Line(line) => format!("{line}\r\n").into_bytes(),
            Op::Storage {
                verb,
                key,
                flags,
                exptime,
                value,
                announced,
                cas,
                noreply,
            } => {
                let mut line = format!(
                    "{verb} {key} {flags} {exptime} {}",
                    announced.unwrap_or(value.len())
                );
                match cas {
                    None => {}
                    Some(CasFrom::Last) => {
                        line += &format!(" {}", last_cas.get(key).copied().unwrap_or(0));
                    }
                    Some(CasFrom::Text(text)) => line += &format!(" {text}"),
                }
                if *noreply {
                    line += " noreply";
                }
                let mut bytes = format!("{line}\r\n").into_bytes();
                bytes.extend_from_slice(value);
                bytes.extend_from_slice(b"\r\n");
                bytes
            }
        }
    }
}

/// The sequences are the same for every server (a check of the harness).
#[test]
fn sequences_are_deterministic() {
    let mut a = Rng(7);
    let mut b = Rng(7);
    let empty = HashMap::new();
    for _ in 0..COMMANDS {
        assert_eq!(
            Op::random(&mut a).render(&empty),
            Op::random(&mut b).render(&empty)
        );
    }
}
