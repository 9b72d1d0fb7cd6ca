//! The server binary over TCP, on both I/O backends: the protocol, the
//! graceful shutdown on SIGTERM, and libmemcached's conformance suite
//! (`memccapable`, skipped with a message where it is not installed).

mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{on_both_backends, Client, Server, BACKENDS, DEADLINE};

#[test]
fn storage_and_retrieval_over_tcp() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &["-I", "200000"]);
        let mut c = server.connect();
        assert_eq!(c.ask("set a 1 0 3\r\nabc\r\n"), "STORED\r\n");
        assert_eq!(c.ask("add a 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
        // Pipelined: three commands in one write, three replies in order.
        c.send(b"set b 2 0 1\r\nB\r\nappend b 0 0 2\r\n++\r\nincr nothing 1\r\n");
        assert_eq!(
            [c.line(), c.line(), c.line()],
            ["STORED\r\n", "STORED\r\n", "NOT_FOUND\r\n"]
        );
        let got = c.get("get", &["a", "missing", "b"]);
        let got: Vec<_> = got
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_slice()))
            .collect();
        assert_eq!(got, [("a", &b"abc"[..]), ("b", &b"B++"[..])]);

        // A value larger than any read: it arrives in pieces.
        let big: Vec<u8> = (0..150_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        c.send(format!("set big 0 0 {}\r\n", big.len()).as_bytes());
        c.send(&big);
        assert_eq!(c.ask("\r\n"), "STORED\r\n");
        assert_eq!(c.get("get", &["big"])[0].1, big);

        // Over the item size limit: refused, its bytes skipped, and the
        // connection goes on.
        let huge = vec![b'h'; 200_001];
        c.send(format!("set huge 0 0 {}\r\n", huge.len()).as_bytes());
        c.send(&huge);
        c.send(b"\r\n");
        assert_eq!(c.line(), "SERVER_ERROR object too large for cache\r\n");
        assert_eq!(c.ask("get huge\r\n"), "END\r\n");
        assert_eq!(
            c.ask("set k 0 0 1\r\nxyz\r\n"),
            "CLIENT_ERROR bad data chunk\r\n"
        );
        assert_eq!(c.line(), "ERROR\r\n");
        assert_eq!(c.ask("bogus\r\n"), "ERROR\r\n");
        // A key named noreply is answered.
        assert_eq!(c.ask("delete noreply\r\n"), "NOT_FOUND\r\n");

        // A client that disconnects in the middle of a value: the server
        // goes on serving the others.
        let mut dropped = server.connect();
        dropped.send(b"set half 0 0 10\r\nabc");
        drop(dropped);
        let mut other = server.connect();
        assert_eq!(other.ask("get half\r\n"), "END\r\n");
        assert_eq!(other.ask("quit\r\n"), "");
        assert!(c.ask("version\r\n").starts_with("VERSION "));
    });
}

#[test]
fn cas_conflict_between_two_clients() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &[]);
        let (mut alice, mut bob) = (server.connect(), server.connect());
        assert_eq!(alice.ask("set counter 0 0 1\r\n0\r\n"), "STORED\r\n");
        let cas_a = alice.get("gets", &["counter"])[0].2.unwrap();
        let cas_b = bob.get("gets", &["counter"])[0].2.unwrap();
        assert_eq!(cas_a, cas_b);
        assert_eq!(
            alice.ask(&format!("cas counter 0 0 1 {cas_a}\r\n1\r\n")),
            "STORED\r\n"
        );
        // Bob's version is out of date now.
        assert_eq!(
            bob.ask(&format!("cas counter 0 0 1 {cas_b}\r\n2\r\n")),
            "EXISTS\r\n"
        );
        let (_, value, cas) = bob.get("gets", &["counter"]).remove(0);
        assert_eq!(value, b"1");
        assert_ne!(cas, Some(cas_a));
        assert_eq!(bob.ask("delete counter\r\n"), "DELETED\r\n");
        assert_eq!(
            bob.ask(&format!("cas counter 0 0 1 {cas_b}\r\n2\r\n")),
            "NOT_FOUND\r\n"
        );
    });
}

/// Expiry over TCP without waiting: an absolute time in the past and a
/// negative exptime have expired at once; relative expiry is tested with a
/// clock moved by hand in the protocol's unit tests.
#[test]
fn expired_items_are_gone_over_tcp() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &[]);
        let mut c = server.connect();
        // Past the 30 days, an absolute Unix time: one second after 1970.
        assert_eq!(c.ask("set past 0 2592001 1\r\na\r\n"), "STORED\r\n");
        assert_eq!(c.ask("set neg 0 -1 1\r\na\r\n"), "STORED\r\n");
        assert_eq!(c.ask("set live 0 3600 1\r\na\r\n"), "STORED\r\n");
        assert_eq!(c.get("get", &["past", "neg", "live"]).len(), 1);
        assert_eq!(c.ask("touch live -1\r\n"), "TOUCHED\r\n");
        assert_eq!(c.ask("get live\r\n"), "END\r\n");
    });
}

/// SIGTERM: a command whose bytes are still arriving is finished and
/// answered, a connection between commands is closed, nothing new is
/// accepted, and the process exits with 0.
#[test]
fn sigterm_finishes_commands_in_progress_then_exits_0() {
    on_both_backends(|backend| {
        let mut server = Server::start(backend, &[]);
        let mut busy = server.connect();
        let mut idle = server.connect();
        assert_eq!(idle.ask("version\r\n").split(' ').next(), Some("VERSION"));
        // One write: once the version is answered, the server has read the
        // start of the set with it, so that command is in progress.
        assert!(busy
            .ask("version\r\nset k 0 0 5\r\nab")
            .starts_with("VERSION "));
        server.terminate();
        server.wait_for("no longer accepting");
        // The idle connection's close shows the stop has reached the
        // connections; only then does the rest of the value follow.
        assert!(idle.closed(), "{backend}: the idle connection stays open");
        busy.send(b"cde\r\n");
        assert_eq!(busy.line(), "STORED\r\n", "{backend}");
        assert!(busy.closed(), "{backend}: the busy connection stays open");
        let status = server.wait();
        assert!(status.success(), "{backend}: {status}");
    });
}

/// A server stopped with SIGTERM leaves its port free: the next one binds
/// it at once, ten times over.
#[test]
fn restarts_on_the_same_port_at_once() {
    on_both_backends(|backend| {
        let mut address = "127.0.0.1:0".to_string();
        for round in 0..10 {
            let mut server = Server::start_on(&address, backend, 1, &[]);
            address = server.addr.to_string();
            let mut c = server.connect();
            assert!(
                c.ask("version\r\n").starts_with("VERSION "),
                "{backend}, round {round}"
            );
            drop(c);
            server.terminate();
            server.wait_for("stopped");
            let status = server.wait();
            assert!(status.success(), "{backend}, round {round}: {status}");
        }
    });
}

/// libmemcached's conformance suite, every ASCII test.
#[test]
fn memccapable_ascii_tests_pass() {
    let Some(tool) = ["memccapable", "memcapable"].into_iter().find(|t| {
        Command::new(t)
            .arg("-?")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    }) else {
        eprintln!(
            "SKIPPED memccapable_ascii_tests_pass: neither memccapable nor memcapable is installed \
             (Debian package libmemcached-tools)"
        );
        return;
    };
    // The suite spends most of its time in its client's waits (small writes
    // held back by Nagle's algorithm): both backends at once.
    std::thread::scope(|scope| {
        for backend in BACKENDS {
            scope.spawn(move || memccapable(tool, backend));
        }
    });
}

fn memccapable(tool: &str, backend: &str) {
    {
        let server = Server::start(backend, &[]);
        let output = Command::new(tool)
            .args([
                "-a",
                "-h",
                "127.0.0.1",
                "-p",
                &server.addr.port().to_string(),
            ])
            .output()
            .expect("run memccapable");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.status.success(),
            "{backend}: {tool} failed:\n{report}"
        );
        assert!(report.contains("All tests passed"), "{backend}:\n{report}");
        assert!(!report.contains("[FAIL]"), "{backend}:\n{report}");
    }
}

/// Values far larger than a 64th of the memory limit are stored, and the
/// newest values survive while they fit (memcached's acceptance: with
/// equal values, nothing evicted under the limit, and at least 95% of the
/// newest that fit kept).
#[test]
fn large_values_and_eviction_under_the_memory_limit() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &["-m", "8"]);
        let mut c = server.connect();
        let value = vec![b'v'; 200_000];
        assert_eq!(set(&mut c, "big", &value), "STORED\r\n");
        assert_eq!(c.get("get", &["big"])[0].1, value);
        // 50 KB values: room for some 160 of them in 8 MiB.
        let value = vec![b'v'; 50_000];
        for i in 0..300 {
            assert_eq!(set(&mut c, &format!("key{i}"), &value), "STORED\r\n");
        }
        let newest: Vec<String> = (200..300).map(|i| format!("key{i}")).collect();
        let newest: Vec<&str> = newest.iter().map(String::as_str).collect();
        assert_eq!(c.get("get", &newest).len(), 100, "{backend}");

        let server = Server::start(backend, &["-m", "64"]);
        let mut c = server.connect();
        let value = vec![b'v'; 600_000];
        let keys: Vec<String> = (0..40).map(|i| format!("key{i}")).collect();
        for key in &keys {
            assert_eq!(set(&mut c, key, &value), "STORED\r\n");
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert_eq!(c.get("get", &keys).len(), 40, "{backend}: 24 MB of 64");
        // At `-I 1m`, as memcached counts an item: too large, not out of
        // memory.
        assert_eq!(
            set(&mut c, "big", &vec![b'v'; 1_048_528]),
            "SERVER_ERROR object too large for cache\r\n"
        );
    });
}

/// Sets `key` to `value` in one write (a short write after a long one
/// would wait for the peer's delayed acknowledgement); the reply.
fn set(c: &mut Client, key: &str, value: &[u8]) -> String {
    let line = format!("set {key} 0 0 {}\r\n", value.len());
    c.send(&[line.as_bytes(), value, b"\r\n"].concat());
    c.line()
}

/// Waits until `done` holds, up to the deadline.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A loose bound on the server's resident memory against clients that
/// pipeline gets of a large value without reading, or announce values they
/// never finish: it stays within a few times the memory limit (copying
/// every reply would take 182 MB; holding every value 50 MB).
#[test]
fn what_clients_send_does_not_inflate_the_server() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &["-m", "8"]);
        let mut c = server.connect();
        let value = vec![b'v'; 100_000];
        assert_eq!(set(&mut c, "big", &value), "STORED\r\n");
        let before = server.peak_rss();
        // 1,820 gets in one write of 16 KB, read only once all are sent.
        c.send(&b"get big\r\n".repeat(1820));
        let mut skip = vec![0; value.len() + 2];
        for _ in 0..1820 {
            assert!(c.line().starts_with("VALUE big 0 100000"));
            c.reader.read_exact(&mut skip).unwrap();
            assert_eq!(c.line(), "END\r\n");
        }
        let grown = server.peak_rss() - before;
        assert!(
            grown < 32 << 20,
            "{backend}: pipelined gets grew the server by {grown} bytes"
        );

        // 50 values of 1,000,000 bytes announced, all but 10 bytes sent.
        let body = vec![b'v'; 999_990];
        let mut clients: Vec<Client> = (0..50).map(|_| server.connect()).collect();
        for (i, client) in clients.iter_mut().enumerate() {
            client.send(format!("set p{i} 0 0 1000000\r\n").as_bytes());
            client.send(&body);
        }
        // Every line read: a stats line on each connection is answered
        // once the session has the set's line (it is waiting for the rest
        // of the value, or skipping it, refused).
        let mut probe = server.connect();
        wait_until("the values to be given room or refused", || {
            probe.send(b"stats\r\n");
            let mut reserved = 0;
            loop {
                let line = probe.line();
                if line == "END\r\n" {
                    break;
                }
                if let Some(n) = line.strip_prefix("STAT reserved_bytes ") {
                    reserved = n.trim().parse::<usize>().unwrap();
                }
            }
            reserved >= 7_000_000
        });
        let grown = server.peak_rss() - before;
        assert!(
            grown < 40 << 20,
            "{backend}: unfinished values grew the server by {grown} bytes"
        );
        drop(clients);
    });
}

/// Connections past `-c` are told so and closed; once one closes, a new
/// one is served.
#[test]
fn connections_past_the_maximum_are_refused() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &["-c", "4"]);
        let mut open: Vec<Client> = (0..4).map(|_| server.connect()).collect();
        for c in &mut open {
            assert!(c.ask("version\r\n").starts_with("VERSION "));
        }
        let mut refused = server.connect();
        assert_eq!(refused.line(), "ERROR Too many open connections\r\n");
        assert!(refused.closed());
        drop(open.pop());
        wait_until("a connection to be accepted again", || {
            let mut c = server.connect();
            c.ask("version\r\n").starts_with("VERSION ")
        });
    });
}

/// The listening socket's queue is memcached's 1024, or `-b`'s (as the
/// kernel caps it), as `ss` reports it (skipped where `ss` is missing).
#[test]
fn the_listen_backlog_is_memcached_s_or_b() {
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    for (args, backlog) in [(&[][..], 1024), (&["-b", "2000"][..], 2000)] {
        let server = Server::start("io_uring", args);
        let Ok(output) = Command::new("ss")
            .args(["-ltnH", &format!("sport = :{}", server.addr.port())])
            .output()
        else {
            eprintln!(
                "SKIPPED the_listen_backlog_is_memcached_s_or_b: ss is not installed (iproute2)"
            );
            return;
        };
        let report = String::from_utf8_lossy(&output.stdout);
        // State, Recv-Q, Send-Q (the backlog of a listening socket), ...
        let queue: u32 = report
            .split_whitespace()
            .nth(2)
            .and_then(|q| q.parse().ok())
            .unwrap_or_else(|| panic!("no backlog in {report:?}"));
        assert_eq!(queue, backlog.min(somaxconn), "{args:?}");
    }
}

/// A thousand connections open, then closed: the server's resident memory
/// goes back to about what it was (the server asks glibc's allocator for
/// that; other C libraries keep what they keep).
#[test]
#[cfg_attr(
    not(all(target_os = "linux", target_env = "gnu")),
    ignore = "gives memory back through glibc's malloc_trim"
)]
fn closed_connections_give_their_memory_back() {
    on_both_backends(|backend| {
        let server = Server::start(backend, &["-c", "2000"]);
        let mut probe = server.connect();
        assert!(probe.ask("version\r\n").starts_with("VERSION "));
        let before = server.rss();
        let mut clients: Vec<Client> = (0..1000).map(|_| server.connect()).collect();
        for c in &mut clients {
            c.send(b"version\r\n");
        }
        for c in &mut clients {
            assert!(c.line().starts_with("VERSION "));
        }
        let open = server.rss();
        drop(clients);
        let stat = |probe: &mut Client, name: &str| -> u64 {
            probe.send(b"stats\r\n");
            let mut value = 0;
            loop {
                let line = probe.line();
                if line == "END\r\n" {
                    return value;
                }
                if let Some(v) = line.strip_prefix(&format!("STAT {name} ")) {
                    value = v.trim().parse().unwrap();
                }
            }
        };
        wait_until("the connections to close", || {
            stat(&mut probe, "curr_connections") == 1
        });
        let grown = open.saturating_sub(before);
        wait_until("the memory to be given back", || {
            server.rss() <= before + grown / 4
        });
    });
}
