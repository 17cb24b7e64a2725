//! `metaroce-top --headless --metrics` as a process: what a scraper and an
//! operator see. A finished replay with `--duration` keeps serving its
//! final figures (the JSON snapshot's); OpenMetrics when asked; clients
//! that never send or never read hold a bounded number of threads for a
//! bounded time while the capture goes on; SIGTERM and SIGHUP end the
//! process cleanly (status 0, JSON written) and scrapes during the
//! shutdown get a whole answer or a closed connection, never a hang; a
//! port in use and a bad address are clear errors before any capture.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{BIN, fixture, many_connections};

/// The exporter, killed on drop if a test fails first.
struct Exporter {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(capture: &Path, json: &Path, extra: &[&str]) -> Exporter {
    let mut child = Command::new(BIN)
        .arg("-r")
        .arg(capture)
        .args(["--speed", "0", "--headless", "--metrics", "127.0.0.1:0"])
        .arg("--json-out")
        .arg(json)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("metaroce-top: serving metrics on http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no address in: {line}"))
        .parse()
        .unwrap();
    Exporter { child, addr }
}

/// One HTTP exchange: (status line, headers, body); Err when the
/// connection was refused or closed without an answer.
fn get(
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> std::io::Result<(String, String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no answer: {raw:?}")))?;
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Ok((status.to_string(), headers.to_string(), body.to_string()))
}

fn sample(body: &str, key: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < end,
            "the exporter did not exit within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// Scrapes until the replay has finished; returns the body.
fn finished_scrape(addr: SocketAddr) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        // 503 (or a reset) while every handler thread waits on a silent
        // client.
        if let Ok((status, _, body)) = get(addr, "/metrics", None)
            && status == "HTTP/1.1 200 OK"
            && sample(&body, "metaroce_capture_running") == Some(0.0)
        {
            return body;
        }
        assert!(Instant::now() < end, "the replay did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_scrape_that_takes_gzip_gets_the_same_figures_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("final.json");
    let e = start(
        &fixture("multipath_loss_receiver.pcap"),
        &json,
        &["--duration", "60"],
    );
    let plain = finished_scrape(e.addr);
    let mut s = TcpStream::connect_timeout(&e.addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]);
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    let body = &raw[split + 4..];
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, body.len());
    let mut text = String::new();
    flate2::read::GzDecoder::new(body)
        .read_to_string(&mut text)
        .unwrap();
    // The analysis' figures are final: only the process' own change.
    let analysis = |b: &str| -> Vec<String> {
        b.lines()
            .filter(|l| !l.contains("process_") && !l.starts_with("metaroce_exporter_"))
            .map(str::to_string)
            .collect()
    };
    assert!(plain.len() > 1000);
    assert_eq!(analysis(&text), analysis(&plain));
    assert!(
        body.len() * 3 < plain.len(),
        "{} -> {}",
        plain.len(),
        body.len()
    );
}

#[test]
fn a_finished_replay_serves_its_final_figures_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("final.json");
    let mut e = start(
        &fixture("multipath_loss_receiver.pcap"),
        &json,
        &["--duration", "60"],
    );
    let body = finished_scrape(e.addr);
    // Still served, still the same figures, a moment later.
    std::thread::sleep(Duration::from_millis(300));
    let (_, headers, again) = get(e.addr, "/metrics", None).unwrap();
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    let data = "metaroce_data_packets_total{src=\"10.0.0.1\",dst=\"10.0.0.2\"}";
    assert_eq!(sample(&again, data), sample(&body, data));
    assert!(sample(&body, data).unwrap() > 0.0, "{body}");
    // OpenMetrics when asked (as Prometheus asks).
    let (_, headers, om) = get(
        e.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .unwrap();
    assert!(
        headers.contains("application/openmetrics-text; version=1.0.0"),
        "{headers}"
    );
    assert!(om.ends_with("# EOF\n"));
    let (status, _, _) = get(e.addr, "/nothing", None).unwrap();
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    // SIGTERM: the JSON snapshot, status 0, the port closed.
    kill(e.child.id(), "TERM");
    let status = wait_exit(&mut e.child, Duration::from_secs(5));
    assert!(status.success(), "{status}");
    let snap: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // Connections fold into their host pair.
    let json_data: u64 = snap["report"]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["src"] == "10.0.0.1" && d["dst"] == "10.0.0.2")
        .map(|d| d["data_packets"].as_u64().unwrap())
        .sum();
    assert_eq!(sample(&body, data), Some(json_data as f64));
    assert!(TcpStream::connect(e.addr).is_err(), "the port is closed");
}

#[test]
fn clients_that_never_send_or_never_read_do_not_stall_anything() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("final.json");
    let mut e = start(
        &fixture("multipath_loss_receiver.pcap"),
        &json,
        &[
            "--duration",
            "60",
            "--metrics-connections",
            "--metrics-paths",
        ],
    );
    // Clients that ask and then never read, and more silent clients than
    // handler threads.
    let mut deaf = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(e.addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        deaf.push(s);
    }
    let silent: Vec<TcpStream> = (0..6)
        .map(|_| TcpStream::connect(e.addr).unwrap())
        .collect();
    // Meanwhile: a scrape gets an answer at once (a 503, or a reset when
    // the 503 was closed before its request came, while every handler
    // waits on a silent client), and the replay goes on.
    let t = Instant::now();
    match get(e.addr, "/metrics", None) {
        Ok((status, _, _)) => assert!(
            status == "HTTP/1.1 200 OK" || status == "HTTP/1.1 503 Service Unavailable",
            "{status}"
        ),
        Err(err) => assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}"),
    }
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // Once the silent clients time out, scrapes are served again.
    let body = finished_scrape(e.addr);
    assert!(sample(&body, "metaroce_frames_total").unwrap() > 0.0);
    drop(silent);
    drop(deaf);
    // A scrape during the shutdown: an answer or a closed connection.
    kill(e.child.id(), "TERM");
    let end = Instant::now() + Duration::from_secs(5);
    while e.child.try_wait().unwrap().is_none() && Instant::now() < end {
        if let Ok((status, _, body)) = get(e.addr, "/metrics", None) {
            assert_eq!(status, "HTTP/1.1 200 OK");
            assert!(
                body.contains("metaroce_build_info"),
                "a whole answer: {body}"
            );
        }
    }
    assert!(wait_exit(&mut e.child, Duration::from_secs(1)).success());
    assert!(json.exists());
}

/// A client that asks for a large body and never reads it blocks one
/// handler thread in its write (until the write timeout): scrapes are
/// still served beside it, and SIGTERM still ends the process at once.
#[test]
fn a_client_that_never_reads_a_large_body_blocks_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("many.pcap");
    many_connections(&capture, 1500);
    let json = dir.path().join("final.json");
    let mut e = start(
        &capture,
        &json,
        &[
            "--duration",
            "60",
            "--metrics-connections",
            "--metrics-max-series",
            "10000",
        ],
    );
    let body = finished_scrape(e.addr);
    // Larger than what the sockets hold: Linux's default send buffer is
    // 4 MiB at most, and a receive window does not grow while nobody
    // reads.
    assert!(body.len() > 12 << 20, "{}", body.len());
    let mut deaf = TcpStream::connect(e.addr).unwrap();
    deaf.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let (status, _, again) = get(e.addr, "/metrics", None).unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Whole (only the process figures differ from the first).
    assert!(
        again.len().abs_diff(body.len()) < 64,
        "{} {}",
        again.len(),
        body.len()
    );
    assert!(again.contains("metaroce_build_info"));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Well before the blocked write times out (10 s): nothing waits for
    // it (the rest is the JSON snapshot of 3,000 directions).
    kill(e.child.id(), "TERM");
    let status = wait_exit(&mut e.child, Duration::from_secs(7));
    assert!(status.success(), "{status}");
    assert!(json.exists());
    drop(deaf);
}

#[test]
fn sighup_ends_a_headless_exporter_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("final.json");
    let mut e = start(
        &fixture("multipath_loss_sender.pcap"),
        &json,
        &["--duration", "60"],
    );
    finished_scrape(e.addr);
    kill(e.child.id(), "HUP");
    let status = wait_exit(&mut e.child, Duration::from_secs(5));
    assert!(status.success(), "{status}");
    assert!(json.exists());
    assert!(TcpStream::connect(e.addr).is_err());
}

fn failing_run(metrics: &str) -> String {
    let out = Command::new(BIN)
        .arg("-r")
        .arg(fixture("multipath_loss_receiver.pcap"))
        .args(["--headless", "--metrics", metrics])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "no snapshot: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_port_in_use_and_a_bad_address_are_clear_errors() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = failing_run(&addr);
    assert!(
        err.contains(&format!(
            "cannot serve metrics on {addr}: the port is in use"
        )),
        "{err}"
    );
    let err = failing_run("9794");
    assert!(err.contains("bad --metrics address '9794'"), "{err}");
    assert!(err.contains("expected HOST:PORT"), "{err}");
    let err = failing_run("192.0.2.1:9794");
    assert!(
        err.contains(
            "cannot serve metrics on 192.0.2.1:9794: that address is not one of this host's"
        ),
        "{err}"
    );
}
