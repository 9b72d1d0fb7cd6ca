//! Runs one measurement in a child process, under a deadline.
//!
//! The child is this same executable with the hidden `__child` subcommand. A
//! child that misses its deadline is killed (SIGKILL) and reported as
//! [`Status::Timeout`]; one that dies without answering is
//! [`Status::Crashed`]. Nothing a runtime under test does can hang or kill
//! the suite.

use crate::child::TEARDOWN_HANG;
use crate::spec::{ChildSpec, Outcome, Status, RESULT_MARKER};
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What one child run produced.
#[derive(Debug, Clone)]
pub struct ChildRun {
    pub outcome: Outcome,
    /// Something went wrong besides the measurement itself (a runtime that
    /// hung or crashed during teardown, after it had answered).
    pub problem: Option<String>,
}

/// Runs `spec` in a child of `exe`, killing it after `deadline`.
pub fn run_child(exe: &Path, spec: &ChildSpec, deadline: Duration) -> ChildRun {
    let json = serde_json::to_string(spec).expect("specs serialize");
    let mut child = match Command::new(exe)
        .arg("__child")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return crashed(format!("could not start {}: {e}", exe.display())),
    };
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    // The stdout reader ends when the child exits (or is killed), which is
    // the event the deadline waits for; stderr is drained alongside so a
    // chatty child can never block on a full pipe.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (out, killed) = match rx.recv_timeout(deadline) {
        Ok(out) => (out, false),
        Err(_) => {
            let _ = child.kill();
            (rx.recv().unwrap_or_default(), true)
        }
    };
    let status = child.wait();
    let err = err_reader.join().unwrap_or_default();
    interpret(&out, &err, status.ok(), killed, deadline)
}

fn interpret(
    out: &str,
    err: &str,
    status: Option<ExitStatus>,
    killed: bool,
    deadline: Duration,
) -> ChildRun {
    let answer = out
        .lines()
        .find_map(|l| l.strip_prefix(RESULT_MARKER))
        .map(serde_json::from_str::<Outcome>);
    let describe = || match (killed, status) {
        (true, _) => format!("killed at its {deadline:?} deadline"),
        (false, Some(s)) => describe_exit(s),
        (false, None) => "exit status unknown".to_string(),
    };
    match answer {
        Some(Ok(outcome)) => {
            let clean = !killed && status.is_some_and(|s| s.success());
            let problem = (!clean && outcome.status != Status::Crashed).then(|| {
                let what = if status.and_then(|s| s.code()) == Some(TEARDOWN_HANG) {
                    "teardown hang".to_string()
                } else {
                    format!("after answering: {}", describe())
                };
                format!("{what}; stderr: {}", tail(err))
            });
            ChildRun { outcome, problem }
        }
        Some(Err(e)) => crashed(format!("unreadable answer ({e}); stderr: {}", tail(err))),
        None if killed => ChildRun {
            outcome: Outcome {
                status: Status::Timeout,
                detail: Some(format!("{}; stderr: {}", describe(), tail(err))),
                ..Outcome::default()
            },
            problem: None,
        },
        None => crashed(format!("{}; stderr: {}", describe(), tail(err))),
    }
}

fn crashed(detail: String) -> ChildRun {
    ChildRun {
        outcome: Outcome {
            status: Status::Crashed,
            detail: Some(detail),
            ..Outcome::default()
        },
        problem: None,
    }
}

fn describe_exit(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// The last few lines of a child's stderr, on one line.
fn tail(err: &str) -> String {
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(4);
    let joined = lines[start..].join(" | ");
    if joined.is_empty() {
        "(empty)".to_string()
    } else {
        joined
    }
}
