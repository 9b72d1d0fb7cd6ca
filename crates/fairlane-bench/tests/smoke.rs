//! Smoke tests of the suite binary: every workload on every runtime for a few
//! milliseconds, checked for the shape of what comes out, and the watchdogs
//! (starvation, deadline) checked on cases built to trip them. No timing is
//! asserted anywhere: these machines are noisy.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_fairlane-bench");
const RUNTIMES: [&str; 3] = ["fairlane", "tokio", "async-executor"];
const WORKLOADS: [&str; 9] = [
    "cycle",
    "yield",
    "churn",
    "locality",
    "transfer",
    "transfer-park",
    "spawn",
    "wake",
    "idle",
];

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run fairlane-bench");
    assert!(
        out.status.success(),
        "fairlane-bench {args:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs the suite briefly (one run, a 20 ms warm-up, a 50 ms window) with
/// `args` added, writing its samples under `name`: its output and samples.
fn run_briefly(name: &str, args: &[&str]) -> (Output, Vec<Value>) {
    let json = scratch(name).join("samples.json");
    let mut all = args.to_vec();
    all.extend(["--runs", "1", "--warmup", "20ms", "--duration", "50ms"]);
    all.extend(["--json", json.to_str().unwrap()]);
    let out = run(&all);
    let samples = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (out, samples)
}

/// Whether a sample is one of fairlane's move counts, which may be 0.
fn is_move_count(s: &Value) -> bool {
    let m = s["metric"].as_str().unwrap();
    m.starts_with("moved ") || m == "handoffs"
}

/// Checks that every sample is ok and positive (move counts: not
/// negative): what was measured, as (runtime, processors, metric).
fn every_sample_positive(samples: &[Value]) -> BTreeSet<(String, u64, String)> {
    let mut seen = BTreeSet::new();
    for s in samples {
        assert_eq!(s["status"], "ok", "{s}");
        let v = s["value"].as_f64().unwrap();
        assert!(v > 0.0 || (is_move_count(s) && v == 0.0), "{s}");
        seen.insert((
            s["runtime"].as_str().unwrap().to_string(),
            s["processors"].as_u64().unwrap(),
            s["metric"].as_str().unwrap().to_string(),
        ));
    }
    seen
}

/// The outcome JSON a child printed.
fn child(spec: Value) -> Value {
    let out = Command::new(BIN)
        .arg("__child")
        .arg(spec.to_string())
        .output()
        .expect("run child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("FAIRLANE_BENCH_RESULT "))
        .unwrap_or_else(|| panic!("no result line in {stdout:?}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn every_workload_on_every_runtime_has_the_right_shape() {
    let dir = scratch("smoke");
    let json = dir.join("samples.json");
    let report = dir.join("report");
    let out = run(&[
        "--workloads",
        &WORKLOADS.join(","),
        "--runtimes",
        &RUNTIMES.join(","),
        "--processors",
        "2",
        "--tasks-per-processor",
        "5",
        "--runs",
        "1",
        "--warmup",
        "2ms",
        "--duration",
        "5ms",
        "--starve-threshold",
        "500ms",
        "--json",
        json.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);

    let samples: Vec<Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut seen = BTreeSet::new();
    for s in &samples {
        for key in [
            "runtime",
            "workload",
            "processors",
            "tasks",
            "value",
            "unit",
            "metric",
            "status",
        ] {
            assert!(s.get(key).is_some(), "sample without {key}: {s}");
        }
        let workload = s["workload"].as_str().unwrap();
        let status = s["status"].as_str().unwrap();
        // Only the fairness workloads may starve; nothing may time out or crash.
        if workload.starts_with("transfer") {
            assert!(["ok", "starved"].contains(&status), "{s}");
        } else {
            assert_eq!(status, "ok", "{s}");
        }
        if status == "ok" {
            let v = s["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("no value: {s}"));
            assert!(v >= 0.0, "{s}");
        }
        assert_eq!(s["processors"], 2, "{s}");
        seen.insert((
            workload.to_string(),
            s["runtime"].as_str().unwrap().to_string(),
        ));
    }
    for w in WORKLOADS {
        for r in RUNTIMES {
            assert!(
                seen.contains(&(w.into(), r.into())),
                "no sample for {w} on {r}"
            );
        }
    }
    assert!(seen.contains(&("wake".into(), "thread-floor".into())));
    let metrics: BTreeSet<&str> = samples
        .iter()
        .filter(|s| s["status"] == "ok")
        .map(|s| s["metric"].as_str().unwrap())
        .collect();
    for m in [
        "ns/op",
        "blocked",
        "moved",
        "apart",
        "ns/spawn",
        "B/task",
        "wake p50",
        "wake p99",
        "wake max",
        "cpu",
        "moved help",
        "moved rebalance",
        "moved steal",
        "moved wake",
        "handoffs",
    ] {
        assert!(metrics.contains(m), "no {m} sample: {metrics:?}");
    }

    let table = String::from_utf8_lossy(&out.stdout);
    for col in [
        "| workload",
        "fairlane",
        "tokio",
        "async-executor",
        "fairlane vs tokio",
    ] {
        assert!(table.contains(col), "table lacks {col}:\n{table}");
    }
    for w in WORKLOADS {
        assert!(
            table.contains(&format!("| {w} ")),
            "table lacks {w}:\n{table}"
        );
    }
    assert!(table.contains("Physical floor"), "{table}");
    // The ordinary program's shape of cycle and churn is in the default
    // suite, on every runtime.
    for w in ["cycle", "churn"] {
        for r in RUNTIMES {
            assert!(
                samples.iter().any(|s| s["workload"] == w
                    && s["runtime"] == *r
                    && s["padded"] == false
                    && s["boxed"] == true
                    && s["spawn"] == "main"),
                "no plain boxed {w} sample on {r}"
            );
        }
        assert!(
            table.contains(&format!("| {w} (plain,boxed) ")),
            "table lacks {w} (plain,boxed):\n{table}"
        );
    }

    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(summary.contains("| workload"));
    for plot in [
        "cycle.svg",
        "transfer-park.svg",
        "spawn.svg",
        "wake-latency.svg",
    ] {
        let svg =
            std::fs::read_to_string(report.join(plot)).unwrap_or_else(|e| panic!("{plot}: {e}"));
        assert!(svg.contains("<svg") && svg.contains("<circle"), "{plot}");
    }
}

#[test]
fn echo_runs_on_the_runtimes_with_a_network_api_and_monoio_only_there() {
    let (out, samples) = run_briefly(
        "echo",
        &[
            "--workloads",
            "yield,echo",
            "--runtimes",
            "fairlane,fairlane-fallback,tokio,monoio,async-executor",
            "--processors",
            "2",
            "--tasks-per-processor",
            "5",
        ],
    );
    let mut seen = BTreeSet::new();
    for s in &samples {
        assert_eq!(s["status"], "ok", "{s}");
        let (w, r) = (
            s["workload"].as_str().unwrap(),
            s["runtime"].as_str().unwrap(),
        );
        seen.insert((
            w.to_string(),
            r.to_string(),
            s["metric"].as_str().unwrap().to_string(),
        ));
        let v = s["value"].as_f64().unwrap();
        assert!(v > 0.0 || (is_move_count(s) && v == 0.0), "{s}");
    }
    for r in ["fairlane", "fairlane-fallback", "tokio", "monoio"] {
        for m in ["ns/req", "req/s", "p99"] {
            assert!(
                seen.contains(&("echo".into(), r.into(), m.into())),
                "no echo {m} on {r}: {seen:?}"
            );
        }
    }
    let ran = |w: &str, r: &str| seen.iter().any(|(sw, sr, _)| sw == w && sr == r);
    assert!(!ran("echo", "async-executor"), "{seen:?}");
    for r in ["fairlane-fallback", "monoio"] {
        assert!(!ran("yield", r), "{r} ran yield: {seen:?}");
    }
    for r in ["fairlane", "tokio", "async-executor"] {
        assert!(ran("yield", r), "{r} did not run yield: {seen:?}");
    }

    // The echo row has a ratio against monoio.
    let table = String::from_utf8_lossy(&out.stdout);
    let cells =
        |line: &str| -> Vec<String> { line.split('|').map(|c| c.trim().to_string()).collect() };
    let header = cells(table.lines().next().unwrap());
    let col = header
        .iter()
        .position(|c| c == "fairlane vs monoio")
        .unwrap_or_else(|| panic!("no monoio ratio column:\n{table}"));
    let row = table
        .lines()
        .map(cells)
        .find(|c| c[1] == "echo" && c[4] == "ns/req")
        .unwrap_or_else(|| panic!("no echo ns/req row:\n{table}"));
    assert!(
        row[col].ends_with('×'),
        "echo row without a monoio ratio:\n{table}"
    );

    // Run alone on another workload, monoio's child says why it cannot.
    let outcome = child(serde_json::json!({
        "workload": "yield",
        "runtime": "monoio",
        "processors": 1,
        "tasks": 4,
        "warmup_ms": 1,
        "duration_ms": 1,
        "starve_threshold_ms": 100,
        "seed": 1,
    }));
    assert_eq!(outcome["status"], "crashed", "{outcome}");
    assert!(
        outcome["detail"]
            .as_str()
            .unwrap()
            .contains("only runs the echo workload"),
        "{outcome}"
    );
}

#[test]
fn transfer_watchdog_reports_a_starving_runtime() {
    // One worker thread and a leader that spins without yielding: nobody else
    // can ever acknowledge, so every runtime without preemption starves.
    for runtime in ["tokio", "async-executor"] {
        for workload in ["transfer", "transfer-park"] {
            let outcome = child(serde_json::json!({
                "workload": workload,
                "runtime": runtime,
                "processors": 1,
                "tasks": 4,
                "warmup_ms": 10,
                "duration_ms": 50,
                "starve_threshold_ms": 200,
                "seed": 1,
            }));
            assert_eq!(
                outcome["status"], "starved",
                "{runtime} {workload}: {outcome}"
            );
            let wait = &outcome["metrics"][0];
            assert_eq!(wait["name"], "max ack wait");
            assert!(wait["value"].as_f64().unwrap() >= 200.0, "{outcome}");
        }
    }
}

#[test]
fn starved_runtimes_show_in_the_table_and_are_not_rerun() {
    let dir = scratch("starve");
    let json = dir.join("samples.json");
    // `hang` is a hidden test workload whose child never answers: the suite
    // must kill it at its deadline, say so, and not run it again.
    let out = run(&[
        "--workloads",
        "hang",
        "--runtimes",
        "tokio",
        "--processors",
        "1",
        "--runs",
        "3",
        "--warmup",
        "1ms",
        "--duration",
        "1ms",
        "--child-slack",
        "300ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("timeout"), "{table}");
    let samples: Vec<Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(samples[0]["status"], "timeout");
    assert!(samples[0]["value"].is_null());
}

/// Every combination of the shape options is measured, on every runtime
/// of the shaped workloads, and spread spawning works for each.
#[test]
fn shape_options_measure_every_combination_on_every_runtime() {
    let (_, samples) = run_briefly(
        "shapes",
        &[
            "--workloads",
            "cycle,churn,yield",
            "--runtimes",
            "fairlane,tokio,async-executor",
            "--processors",
            "2",
            "--tasks-per-processor",
            "10",
            "--spawn",
            "main,spread",
            "--padded",
            "no",
            "--boxed",
        ],
    );
    for s in &samples {
        assert_eq!(s["status"], "ok", "{s}");
        assert_eq!(s["boxed"], true, "{s}");
        // yield has no semaphores: always padded.
        assert_eq!(s["padded"], s["workload"] == "yield", "{s}");
    }
    for w in ["cycle", "churn", "yield"] {
        for r in ["fairlane", "tokio", "async-executor"] {
            for spawn in ["main", "spread"] {
                assert!(
                    samples.iter().any(|s| s["workload"] == w
                        && s["runtime"] == r
                        && s["spawn"] == spawn
                        && s["metric"] == "ns/op"),
                    "no {spawn} {w} sample on {r}"
                );
            }
        }
    }
    // Only fairlane counts its moves.
    assert!(samples
        .iter()
        .filter(|s| s["metric"] == "moved wake")
        .all(|s| s["runtime"] == "fairlane"));
    assert!(samples.iter().any(|s| s["metric"] == "moved wake"));
}

#[test]
fn help_explains_every_option() {
    let out = run(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--processors",
        "--tasks-per-processor",
        "--duration",
        "--warmup",
        "--runs",
        "--workloads",
        "--runtimes",
        "--starve-threshold",
        "--full",
        "--json",
        "--report",
        "--spawn",
        "--padded",
        "--boxed",
    ] {
        assert!(help.contains(opt), "--help lacks {opt}");
    }
    for hidden in ["__child", "- hang", "idle, hang", "thread-floor"] {
        assert!(!help.contains(hidden), "--help shows {hidden}:\n{help}");
    }
}

/// The memcached workload runs on fairlane (both backends) and tokio with
/// its four metrics, at each processor count, and on real memcached where
/// that is installed (a note says so where it is not); the runtimes without
/// a network API, and monoio, skip it.
#[test]
fn memcached_runs_on_the_network_runtimes_and_real_memcached_where_installed() {
    let args = ["--workloads", "memcached", "--processors", "1,2"];
    let (out, samples) = run_briefly("memcached", &args);
    let seen = every_sample_positive(&samples);
    let installed = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("memcached").is_file())
    });
    let mut runtimes = vec!["fairlane", "fairlane-fallback", "tokio"];
    if installed {
        runtimes.push("memcached");
    } else {
        let notes = String::from_utf8_lossy(&out.stdout);
        assert!(notes.contains("real memcached is not installed"), "{notes}");
    }
    for r in &runtimes {
        for p in [1, 2] {
            for m in ["ns/op", "ops/s", "p99", "cpu/op"] {
                assert!(
                    seen.contains(&(r.to_string(), p, m.into())),
                    "no memcached {m} on {r} at p={p}: {seen:?}"
                );
            }
        }
    }
    for r in ["async-executor", "monoio"] {
        assert!(!seen.iter().any(|(sr, _, _)| sr == r), "{r} ran: {seen:?}");
    }
}

/// The http workloads (a hyper server at each processor count; an axum
/// application served by the runtime's `serve` at the smallest) report
/// their four metrics on fairlane (both backends) and tokio; the runtimes
/// without a network API, monoio and real memcached skip them.
#[test]
fn http_runs_on_fairlane_and_tokio_only() {
    let args = ["--workloads", "http,http-axum", "--processors", "1,2"];
    let (out, samples) = run_briefly("http", &args);
    every_sample_positive(&samples);
    let table = String::from_utf8_lossy(&out.stdout);
    for (w, processors) in [("http", &[1, 2][..]), ("http-axum", &[1])] {
        let of_w: Vec<Value> = samples
            .iter()
            .filter(|s| s["workload"] == w)
            .cloned()
            .collect();
        let seen = every_sample_positive(&of_w);
        for r in ["fairlane", "fairlane-fallback", "tokio"] {
            for &p in processors {
                for m in ["ns/req", "req/s", "p99", "cpu/req"] {
                    assert!(
                        seen.contains(&(r.to_string(), p, m.into())),
                        "no {w} {m} on {r} at p={p}: {seen:?}"
                    );
                }
            }
        }
        for r in ["async-executor", "monoio", "memcached"] {
            assert!(
                !seen.iter().any(|(sr, _, _)| sr == r),
                "{r} ran {w}: {seen:?}"
            );
        }
        assert!(
            seen.iter().all(|(_, p, _)| processors.contains(p)),
            "{w} at other processor counts: {seen:?}"
        );
        assert!(table.contains(&format!("| {w} ")), "{table}");
    }
}
