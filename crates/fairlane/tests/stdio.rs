//! `io::stdin`, `io::stdout`, `io::stderr`: real standard streams, in a
//! child process (this test binary again, running [`child`] in the mode an
//! environment variable names) whose descriptors are pipes the test feeds
//! and reads. A megabyte through `read_to_end` and `write_all`, 7-byte
//! reads (what a blocking read brings beyond them is kept for the next),
//! the end of the input, lines written through a fresh handle each (in
//! order, none lost when the handle is dropped), a closed stdout pipe
//! (`BrokenPipe`, not a hang or a panic), a prompt with no newline that
//! reaches the reader before the answer, tokio's traits; each on both I/O
//! backends. And, in this process, the handles' traits and the errors
//! outside a runtime.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use fairlane::io::IoBackend;

/// Names the child's mode; unset, [`child`] does nothing.
const CHILD_ENV: &str = "FAIRLANE_STDIO_TEST_CHILD";
/// What the child writes to stdout before anything else, so that the test
/// can skip what the test harness printed before it.
const MARKER: &[u8] = b"<<fairlane stdio child>>\n";

common::on_both_backends!(
    a_megabyte_in_and_out,
    seven_byte_reads_lose_nothing,
    empty_input_is_the_end,
    lines_through_a_fresh_handle_each,
    a_closed_stdout_pipe_is_an_error,
    a_prompt_without_a_newline_is_flushed,
    queued_writes_survive_shutdown,
    tokio_traits,
);

/// Bytes that do not repeat with any short period.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 8) ^ (i >> 17)) as u8)
        .collect()
}

struct ChildOutput {
    /// Stdout after the marker.
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs [`child`] in `mode` on `backend` with `input` as its standard input
/// and returns what it wrote, asserting that it exited successfully.
fn run_child(mode: &str, backend: IoBackend, input: Vec<u8>) -> ChildOutput {
    let mut child = spawn_child(mode, backend);
    let mut stdin = child.stdin.take().expect("piped");
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("wait for the child");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "child {mode} failed: {:?}; stderr:\n{stderr}",
        out.status
    );
    feeder
        .join()
        .expect("feeder thread")
        .expect("the child reads all of its input");
    let at = out
        .stdout
        .windows(MARKER.len())
        .position(|w| w == MARKER)
        .unwrap_or_else(|| panic!("no marker in the child's stdout; stderr:\n{stderr}"));
    assert!(
        stderr.contains(&format!("backend={backend}\n")),
        "child ran on another backend; stderr:\n{stderr}"
    );
    ChildOutput {
        stdout: out.stdout[at + MARKER.len()..].to_vec(),
        stderr,
    }
}

fn spawn_child(mode: &str, backend: IoBackend) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary path"))
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(CHILD_ENV, mode)
        .env("FAIRLANE_IO_BACKEND", backend.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the test binary as a child")
}

/// Asserts `got == want` with a readable message (not two megabytes).
fn assert_same(got: &[u8], want: &[u8]) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "output differs from the input: {} bytes out, {} in, first difference at {first:?}",
            got.len(),
            want.len()
        );
    }
}

fn a_megabyte_in_and_out(backend: IoBackend) {
    let input = pattern(1 << 20);
    let out = run_child("echo", backend, input.clone());
    assert_same(&out.stdout, &input);
    assert!(
        out.stderr
            .contains(&format!("read {} bytes\n", input.len())),
        "stderr:\n{}",
        out.stderr
    );
}

fn seven_byte_reads_lose_nothing(backend: IoBackend) {
    // Not a multiple of 7 nor of any read size.
    let input = pattern(300_007);
    let out = run_child("small", backend, input.clone());
    assert_same(&out.stdout, &input);
    assert!(
        out.stderr.contains("largest=7 then 0, 0\n"),
        "stderr:\n{}",
        out.stderr
    );
}

fn empty_input_is_the_end(backend: IoBackend) {
    let out = run_child("small", backend, Vec::new());
    assert_same(&out.stdout, b"");
    assert!(
        out.stderr.contains("largest=0 then 0, 0\n"),
        "stderr:\n{}",
        out.stderr
    );
}

fn lines_through_a_fresh_handle_each(backend: IoBackend) {
    let input: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    let out = run_child("lines", backend, input.clone().into_bytes());
    assert_same(&out.stdout, input.as_bytes());
    assert!(
        out.stderr.contains("lines=5000\n"),
        "stderr:\n{}",
        out.stderr
    );
}

fn a_closed_stdout_pipe_is_an_error(backend: IoBackend) {
    let mut child = spawn_child("epipe", backend);
    // Past what the harness prints, then closed: the child's writes fail.
    let mut stdout = child.stdout.take().expect("piped");
    read_until(&mut stdout, MARKER);
    drop(stdout);
    // Tells the child that its stdout is closed.
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(b"closed").expect("write to the child");
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("read the child's stderr");
    let status = child.wait().expect("wait for the child");
    assert!(
        status.success(),
        "child failed: {status:?}; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("backend={backend}\n")),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("write error: BrokenPipe\n"),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("after it: BrokenPipe\n"),
        "stderr:\n{stderr}"
    );
}

/// Reads the child's stdout until what it read ends with `end`.
fn read_until(stdout: &mut impl Read, end: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(end) {
        let n = stdout.read(&mut byte).expect("read the child's stdout");
        assert_eq!(n, 1, "the child's stdout ended before {end:?}: {seen:?}");
        seen.push(byte[0]);
    }
    seen
}

fn a_prompt_without_a_newline_is_flushed(backend: IoBackend) {
    let mut child = spawn_child("prompt", backend);
    let mut stdout = child.stdout.take().expect("piped");
    read_until(&mut stdout, MARKER);
    // The child waits for the answer: the prompt must have left std's
    // line buffer without a newline.
    read_until(&mut stdout, b"name? ");
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(b"fairlane\nand more\n")
        .expect("answer the child");
    drop(stdin);
    let mut rest = String::new();
    stdout
        .read_to_string(&mut rest)
        .expect("read the child's stdout");
    let status = child.wait().expect("wait for the child");
    assert!(status.success(), "child failed: {status:?}");
    assert_eq!(rest, "hello, fairlane\n");
}

fn queued_writes_survive_shutdown(backend: IoBackend) {
    let out = run_child("shutdown", backend, Vec::new());
    let want: String = (0..100).map(|i| format!("line {i}\n")).collect();
    assert_same(&out.stdout, want.as_bytes());
    assert!(
        out.stderr.contains("shut down\n"),
        "stderr:\n{}",
        out.stderr
    );
}

fn tokio_traits(backend: IoBackend) {
    let input = pattern(200_000);
    let out = run_child("tokio", backend, input.clone());
    assert_same(&out.stdout, &input);
    assert!(
        out.stderr.contains("tokio done\n"),
        "stderr:\n{}",
        out.stderr
    );
}

#[test]
fn handles_are_send_sync_unpin() {
    fn check<T: Send + Sync + Unpin + std::fmt::Debug + std::os::fd::AsFd>() {}
    check::<fairlane::io::Stdin>();
    check::<fairlane::io::Stdout>();
    check::<fairlane::io::Stderr>();
    use std::os::fd::AsRawFd;
    assert_eq!(fairlane::io::stdin().as_raw_fd(), 0);
    assert_eq!(fairlane::io::stdout().as_raw_fd(), 1);
    assert_eq!(fairlane::io::stderr().as_raw_fd(), 2);
}

#[test]
fn outside_a_runtime_reads_and_writes_fail() {
    use futures_lite::future::block_on;
    use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
    let check = |r: std::io::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert!(
            e.to_string().contains("inside a fairlane runtime"),
            "{what}: {e}"
        );
    };
    let mut buf = [0u8; 8];
    check(
        block_on(fairlane::io::stdin().read(&mut buf)).map(drop),
        "stdin read",
    );
    check(
        block_on(fairlane::io::stdout().write(b"x")).map(drop),
        "stdout write",
    );
    check(block_on(fairlane::io::stdout().flush()), "stdout flush");
    check(
        block_on(fairlane::io::stderr().write(b"x")).map(drop),
        "stderr write",
    );
    check(block_on(fairlane::io::stderr().close()), "stderr close");
}

/// The child half of the tests above: with [`CHILD_ENV`] set, runs that
/// mode on the backend `FAIRLANE_IO_BACKEND` names and exits (before the
/// harness prints more).
#[test]
#[ignore = "the child process of the other tests; does nothing when run by itself"]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    if mode == "shutdown" {
        child_shutdown();
        std::process::exit(0);
    }
    let rt = fairlane::Runtime::builder()
        .processors(2)
        .build()
        .expect("build runtime");
    let backend = rt.io_backend();
    rt.block_on(async move {
        use futures_lite::io::AsyncWriteExt;
        let mut err = fairlane::io::stderr();
        err.write_all(format!("backend={backend}\n").as_bytes())
            .await
            .unwrap();
        let mut out = fairlane::io::stdout();
        out.write_all(MARKER).await.unwrap();
        out.flush().await.unwrap();
        let report = match mode.as_str() {
            "echo" => child_echo().await,
            "small" => child_small().await,
            "lines" => child_lines().await,
            "epipe" => child_epipe().await,
            "prompt" => child_prompt().await,
            "tokio" => child_tokio().await,
            other => panic!("unknown child mode {other:?}"),
        };
        err.write_all(report.as_bytes()).await.unwrap();
        err.flush().await.unwrap();
    });
    std::process::exit(0);
}

/// Writes lines that wait, queued, behind a blocking closure that holds
/// the pool's one thread, then shuts the runtime down without waiting for
/// that closure: the shutdown drops the queued write job, which writes
/// them.
fn child_shutdown() {
    use futures_lite::io::AsyncWriteExt;
    let rt = fairlane::Runtime::builder()
        .processors(1)
        .max_blocking_threads(1)
        .build()
        .expect("build runtime");
    let backend = rt.io_backend();
    let (release, released) = std::sync::mpsc::channel::<()>();
    rt.block_on(async move {
        let mut err = fairlane::io::stderr();
        err.write_all(format!("backend={backend}\n").as_bytes())
            .await
            .unwrap();
        err.flush().await.unwrap();
        let mut out = fairlane::io::stdout();
        out.write_all(MARKER).await.unwrap();
        out.flush().await.unwrap();
        let (started, is_started) = std::sync::mpsc::channel();
        drop(fairlane::task::spawn_blocking(move || {
            started.send(()).unwrap();
            let _ = released.recv();
        }));
        is_started.recv().unwrap();
        for i in 0..100 {
            fairlane::io::stdout()
                .write_all(format!("line {i}\n").as_bytes())
                .await
                .unwrap();
        }
    });
    rt.shutdown_timeout(std::time::Duration::ZERO);
    drop(release);
    eprintln!("shut down");
}

async fn child_echo() -> String {
    use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
    let mut all = Vec::new();
    fairlane::io::stdin().read_to_end(&mut all).await.unwrap();
    let mut out = fairlane::io::stdout();
    out.write_all(&all).await.unwrap();
    out.flush().await.unwrap();
    format!("read {} bytes\n", all.len())
}

async fn child_small() -> String {
    use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
    let mut input = fairlane::io::stdin();
    let mut out = fairlane::io::stdout();
    let mut buf = [0u8; 7];
    let mut largest = 0;
    loop {
        let n = input.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        largest = largest.max(n);
        out.write_all(&buf[..n]).await.unwrap();
    }
    // The end stays the end.
    let again = input.read(&mut buf).await.unwrap();
    let third = fairlane::io::stdin().read(&mut buf).await.unwrap();
    out.flush().await.unwrap();
    format!("largest={largest} then {again}, {third}\n")
}

async fn child_lines() -> String {
    use futures_lite::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use futures_lite::StreamExt;
    let mut lines = BufReader::new(fairlane::io::stdin()).lines();
    let mut count = 0;
    while let Some(line) = lines.next().await {
        let line = line.unwrap();
        // A handle of its own, dropped with its bytes possibly unwritten.
        fairlane::io::stdout()
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        count += 1;
    }
    // A fresh handle's flush waits for every handle's bytes.
    fairlane::io::stdout().flush().await.unwrap();
    format!("lines={count}\n")
}

async fn child_epipe() -> String {
    use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
    // The test closed the reading end of stdout when this comes.
    let mut closed = String::new();
    fairlane::io::stdin()
        .read_to_string(&mut closed)
        .await
        .unwrap();
    assert_eq!(closed, "closed");
    let mut out = fairlane::io::stdout();
    let chunk = vec![b'x'; 64 * 1024];
    // At most 64 MiB: a pipe that never fails ends the loop too.
    let mut result = Ok(());
    for _ in 0..1024 {
        result = out.write_all(&chunk).await;
        if result.is_err() {
            break;
        }
    }
    if result.is_ok() {
        result = out.flush().await;
    }
    let kind = match result {
        Ok(()) => "none".to_string(),
        Err(e) => format!("{:?}", e.kind()),
    };
    // A write after it fails too, from the write or from the flush that
    // waits for it.
    let again = match out.write_all(b"more").await {
        Ok(()) => out.flush().await,
        Err(e) => Err(e),
    };
    let again = match again {
        Ok(()) => "Ok".to_string(),
        Err(e) => format!("{:?}", e.kind()),
    };
    format!("write error: {kind}\nafter it: {again}\n")
}

async fn child_prompt() -> String {
    use futures_lite::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut out = fairlane::io::stdout();
    out.write_all(b"name? ").await.unwrap();
    out.flush().await.unwrap();
    let mut name = String::new();
    BufReader::new(fairlane::io::stdin())
        .read_line(&mut name)
        .await
        .unwrap();
    out.write_all(format!("hello, {}\n", name.trim_end()).as_bytes())
        .await
        .unwrap();
    out.flush().await.unwrap();
    "prompt done\n".to_string()
}

async fn child_tokio() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut all = Vec::new();
    fairlane::io::stdin().read_to_end(&mut all).await.unwrap();
    let mut out = fairlane::io::stdout();
    out.write_all(&all).await.unwrap();
    out.shutdown().await.unwrap();
    "tokio done\n".to_string()
}
