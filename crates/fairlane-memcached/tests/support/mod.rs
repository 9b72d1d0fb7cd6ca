//! What the integration tests share: the server binary in a child process,
//! real memcached where it is installed, and a blocking client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Generous: only a server that hangs takes this long.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub const BACKENDS: [&str; 2] = ["io_uring", "fallback"];

/// The server in a child process; its standard error's lines arrive on
/// `lines` (read by a thread, so that waiting for one has a deadline).
pub struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub addr: SocketAddr,
}

impl Server {
    /// A server on one processor.
    pub fn start(backend: &str, args: &[&str]) -> Server {
        Server::start_on("127.0.0.1:0", backend, 1, args)
    }

    pub fn start_on(address: &str, backend: &str, processors: usize, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairlane-memcached"))
            .arg(address)
            .arg(processors.to_string())
            .args(args)
            .env("FAIRLANE_IO_BACKEND", backend)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stderr = child.stderr.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut server = Server {
            child,
            lines,
            addr: "0.0.0.0:0".parse().unwrap(),
        };
        let line = server.wait_for("listening on ");
        server.addr = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        assert!(line.contains(backend), "{line}");
        server
    }

    /// The next line of the server's standard error that contains `what`.
    pub fn wait_for(&mut self, what: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(what) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line with {what:?} from the server: {e}"),
            }
        }
    }

    pub fn connect(&self) -> Client {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    pub fn terminate(&self) {
        // SAFETY: kill has no memory preconditions; the child is not yet
        // waited for, so its pid is still its own.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) },
            0
        );
    }

    pub fn wait(mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A test that failed leaves no server behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Client {
    pub stream: TcpStream,
    pub reader: BufReader<TcpStream>,
}

impl Client {
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line
    }

    /// Sends `command`, returns the reply's first line.
    pub fn ask(&mut self, command: &str) -> String {
        self.send(command.as_bytes());
        self.line()
    }

    /// The values `get`/`gets` returned for `keys`, as (key, value, cas).
    pub fn get(&mut self, verb: &str, keys: &[&str]) -> Vec<(String, Vec<u8>, Option<u64>)> {
        self.send(format!("{verb} {}\r\n", keys.join(" ")).as_bytes());
        let mut found = Vec::new();
        loop {
            let line = self.line();
            if line == "END\r\n" {
                return found;
            }
            let words: Vec<&str> = line.trim_end().split(' ').collect();
            assert_eq!(words[0], "VALUE", "{line:?}");
            let len: usize = words[3].parse().unwrap();
            let mut value = vec![0; len + 2];
            self.reader.read_exact(&mut value).unwrap();
            assert_eq!(&value[len..], b"\r\n");
            value.truncate(len);
            found.push((
                words[1].to_string(),
                value,
                words.get(4).map(|c| c.parse().unwrap()),
            ));
        }
    }

    /// Whether the server closed the connection (end of stream).
    pub fn closed(&mut self) -> bool {
        let mut byte = [0];
        matches!(self.reader.read(&mut byte), Ok(0))
    }
}

pub fn on_both_backends(scenario: impl Fn(&str)) {
    for backend in BACKENDS {
        scenario(backend);
    }
}

impl Server {
    /// The server's resident memory, in bytes.
    pub fn rss(&self) -> usize {
        self.status_kb("VmRSS:")
    }

    /// The server's largest resident memory so far, in bytes.
    pub fn peak_rss(&self) -> usize {
        self.status_kb("VmHWM:")
    }

    fn status_kb(&self, field: &str) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|kb| {
                kb.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .expect(field)
            * 1024
    }
}

impl Client {
    /// A client of the server at `addr`.
    pub fn connect_to(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }
}

/// Real memcached in a child process, if it is installed.
pub struct Memcached {
    child: Child,
    pub addr: SocketAddr,
}

impl Memcached {
    /// memcached on a free port with `args` (`-m`, `-I`, `-t`); `None`,
    /// with a line saying so, where it is not installed.
    pub fn start(test: &str, args: &[&str]) -> Option<Memcached> {
        if Command::new("memcached")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            eprintln!("SKIPPED {test}: memcached is not installed (Debian package memcached)");
            return None;
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        // A free port, found by binding it; another process could take it
        // before memcached does, so a few tries.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut command = Command::new("memcached");
            command
                .args(["-l", "127.0.0.1", "-U", "0", "-p", &port.to_string()])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if root {
                command.args(["-u", "root"]);
            }
            let mut child = command.spawn().expect("start memcached");
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let deadline = Instant::now() + DEADLINE;
            loop {
                if TcpStream::connect(addr).is_ok() {
                    return Some(Memcached { child, addr });
                }
                if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("memcached did not start");
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
