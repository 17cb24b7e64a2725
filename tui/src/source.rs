//! The capture thread: live libpcap capture (non-blocking, polled, so that
//! quitting is instant) or a paced replay of a capture file, feeding one
//! [`Pipeline`] and publishing a [`Snapshot`] every tick.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use proto_parse::capture::Reader;
use proto_parse::frame::LinkType;

use crate::model::{CaptureStats, RunState, Snapshot, SourceInfo};
use crate::pipeline::Pipeline;

/// How long an idle capture thread sleeps between polls.
const IDLE_POLL: Duration = Duration::from_millis(1);
/// Most packets taken from libpcap per `dispatch` call.
const BATCH: usize = 4096;
/// libpcap's block timeout (TPACKET_V3 hands over a block at least this
/// often); never blocks us, the handle is non-blocking.
const PCAP_TIMEOUT_MS: i32 = 10;

/// The default BPF filter: MetaRoCE (either port) and RoCEv2 (destination
/// port), also behind one 802.1Q tag; and every IP fragment (an IPv4
/// header with more-fragments or an offset, an IPv6 fragment header right
/// after the fixed header, where senders put it unless other extension
/// headers come first), since only the first piece of a datagram carries
/// the UDP ports that the port tests look at. And mirror encapsulations
/// (GRE, which carries ERSPAN, and VXLAN's UDP port 4789), so that the
/// tool pointed at a mirror collector sees the copies.
pub fn default_filter(metaroce_port: u16, rocev2_port: u16) -> String {
    let f = format!(
        "udp port {metaroce_port} or udp dst port {rocev2_port} \
         or ip[6:2] & 0x3fff != 0 or ip6[6] = 44 \
         or ip proto 47 or ip6 proto 47 or udp dst port 4789"
    );
    format!("{f} or (vlan and ({f}))")
}

/// What to capture from.
#[derive(Debug, Clone)]
pub enum SourceKind {
    Live {
        interface: String,
        filter: String,
        snaplen: i32,
        buffer_bytes: i32,
        promisc: bool,
    },
    /// `speed` 0 (or not finite) = as fast as possible.
    Replay { file: PathBuf, speed: f64 },
}

impl SourceKind {
    pub fn info(&self) -> SourceInfo {
        match self {
            SourceKind::Live {
                interface, filter, ..
            } => SourceInfo::Live {
                interface: interface.clone(),
                filter: filter.clone(),
            },
            SourceKind::Replay { file, speed } => SourceInfo::Replay {
                file: file.display().to_string(),
                speed: *speed,
            },
        }
    }
}

enum Command {
    Reset,
}

struct Shared {
    snapshot: Mutex<Arc<Snapshot>>,
    quit: AtomicBool,
    paused: AtomicBool,
}

impl Shared {
    fn publish(&self, snap: Snapshot) {
        let snap = Arc::new(snap);
        *self.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = snap;
    }
}

/// The running capture thread.
pub struct Handle {
    shared: Arc<Shared>,
    cmd: Sender<Command>,
    thread: Option<JoinHandle<()>>,
}

impl Handle {
    /// The latest snapshot (an `Arc` clone under a short lock).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared
            .snapshot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A source of the latest snapshot for other threads (the metrics
    /// server).
    pub fn snapshots(&self) -> crate::metrics::server::SnapshotSource {
        let shared = self.shared.clone();
        Arc::new(move || {
            shared
                .snapshot
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// Forgets the analysis so far (libpcap's counters stay cumulative so
    /// that drops are never hidden).
    pub fn reset(&self) {
        let _ = self.cmd.send(Command::Reset);
    }

    /// Pauses a replay (a live capture keeps draining the kernel buffer;
    /// the UI freezes its view instead).
    pub fn set_paused(&self, paused: bool) {
        self.shared.paused.store(paused, Ordering::Relaxed);
    }

    /// False once the capture thread has ended on its own (it only ends
    /// when told to, so: it panicked).
    pub fn is_alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and returns its final snapshot.
    pub fn stop(mut self) -> Arc<Snapshot> {
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.snapshot()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Opens the source (errors here are the user's: a missing interface,
/// missing permission, a bad filter, an unreadable file) and starts the
/// capture thread.
pub fn start(kind: SourceKind, pipeline: Pipeline, tick: Duration) -> anyhow::Result<Handle> {
    let shared = Arc::new(Shared {
        snapshot: Mutex::new(Arc::new(Snapshot::empty(kind.info()))),
        quit: AtomicBool::new(false),
        paused: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel();
    let sh = shared.clone();
    let thread = match kind {
        SourceKind::Live {
            interface,
            filter,
            snaplen,
            buffer_bytes,
            promisc,
        } => {
            let cap = open_live(&interface, &filter, snaplen, buffer_bytes, promisc)?;
            thread::Builder::new()
                .name("capture".into())
                .spawn(move || run_live(cap, pipeline, &sh, &rx, tick))?
        }
        SourceKind::Replay { file, speed } => {
            let reader = Reader::open_or_stdin(&file)
                .map_err(|e| anyhow!("cannot read capture {}: {e}", file.display()))?;
            thread::Builder::new()
                .name("replay".into())
                .spawn(move || run_replay(reader, pipeline, &sh, &rx, tick, speed))?
        }
    };
    Ok(Handle {
        shared,
        cmd: tx,
        thread: Some(thread),
    })
}

/// Opens `interface` with libpcap, non-blocking, with `filter`.
pub fn open_live(
    interface: &str,
    filter: &str,
    snaplen: i32,
    buffer_bytes: i32,
    promisc: bool,
) -> anyhow::Result<pcap::Capture<pcap::Active>> {
    let devices = pcap::Device::list().unwrap_or_default();
    if !devices.is_empty() && !devices.iter().any(|d| d.name == interface) {
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        bail!(
            "interface '{interface}' does not exist (available: {})",
            names.join(", ")
        );
    }
    let explain = |e: pcap::Error| {
        let text = e.to_string();
        let lower = text.to_lowercase();
        if lower.contains("permission") || lower.contains("not permitted") {
            anyhow!(
                "no permission to capture on '{interface}' ({text}): run as root, or give the \
                 binary the capabilities: sudo setcap cap_net_raw,cap_net_admin=eip $(which metaroce-top)"
            )
        } else if lower.contains("no such device") || lower.contains("doesn't exist") {
            anyhow!("interface '{interface}' does not exist ({text})")
        } else {
            anyhow!("cannot capture on '{interface}': {text}")
        }
    };
    let cap = pcap::Capture::from_device(interface)
        .map_err(explain)?
        .promisc(promisc)
        .snaplen(snaplen)
        .buffer_size(buffer_bytes)
        .timeout(PCAP_TIMEOUT_MS)
        .precision(pcap::Precision::Nano)
        .open()
        .map_err(explain)?;
    let mut cap = cap.setnonblock().map_err(explain)?;
    cap.filter(filter, true)
        .with_context(|| format!("invalid BPF filter '{filter}'"))?;
    Ok(cap)
}

fn wall_ns(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

fn epoch_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn run_live(
    mut cap: pcap::Capture<pcap::Active>,
    mut pipeline: Pipeline,
    shared: &Shared,
    rx: &Receiver<Command>,
    tick: Duration,
) {
    let link = LinkType::from(cap.get_datalink().0 as u32);
    let start = Instant::now();
    let mut last_tick = start;
    let mut state = RunState::Running;
    let mut stats = CaptureStats::default();
    loop {
        let quit = shared.quit.load(Ordering::Relaxed);
        while let Ok(cmd) = rx.try_recv() {
            match cmd {
                Command::Reset => pipeline.reset(),
            }
        }
        let mut got = 0;
        if state == RunState::Running && !quit {
            let res = cap.dispatch(Some(BATCH), |p| {
                let h = p.header;
                // Precision::Nano: tv_usec holds nanoseconds.
                let ts = (h.ts.tv_sec as u64)
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(h.ts.tv_usec as u64);
                pipeline.on_frame(link, ts, p.data, h.len);
            });
            match res {
                Ok(n) => got = n,
                Err(e) => state = RunState::Failed(format!("capture failed: {e}")),
            }
        }
        if quit || last_tick.elapsed() >= tick {
            last_tick = Instant::now();
            if let Ok(s) = cap.stats() {
                // libpcap's counters are u32 and wrap: widen them.
                stats.received = widen(stats.received, s.received);
                stats.kernel_drops = widen(stats.kernel_drops, s.dropped);
                stats.interface_drops = widen(stats.interface_drops, s.if_dropped);
            }
            pipeline.advance_time(epoch_ns());
            shared.publish(pipeline.snapshot(wall_ns(start), state.clone(), stats));
        }
        if quit {
            return;
        }
        if got == 0 {
            thread::sleep(IDLE_POLL);
        }
    }
}

/// Extends a wrapping u32 counter into u64 given its previous value.
fn widen(prev: u64, now: u32) -> u64 {
    let low = prev as u32;
    prev - u64::from(low) + u64::from(now) + if now < low { 1 << 32 } else { 0 }
}

fn run_replay(
    mut reader: Reader<Box<dyn std::io::Read + Send>>,
    mut pipeline: Pipeline,
    shared: &Shared,
    rx: &Receiver<Command>,
    tick: Duration,
    speed: f64,
) {
    let paced = speed.is_finite() && speed > 0.0;
    let start = Instant::now();
    let mut last_tick = start;
    let mut stats = CaptureStats::default();
    // Replay clock: wall time spent unpaused since the first record.
    let mut first_ts: Option<u64> = None;
    let mut played = Duration::ZERO;
    let mut played_from = Instant::now();
    let mut was_paused = false;

    // Returns true to quit. Handles commands, pause and ticks.
    let mut housekeeping = |pipeline: &mut Pipeline,
                            stats: &CaptureStats,
                            state: &RunState,
                            clock: Option<u64>|
     -> bool {
        while let Ok(cmd) = rx.try_recv() {
            match cmd {
                Command::Reset => pipeline.reset(),
            }
        }
        let quit = shared.quit.load(Ordering::Relaxed);
        if quit || last_tick.elapsed() >= tick {
            last_tick = Instant::now();
            if let Some(now) = clock {
                pipeline.advance_time(now);
            }
            shared.publish(pipeline.snapshot(wall_ns(start), state.clone(), *stats));
        }
        quit
    };

    loop {
        let paused = shared.paused.load(Ordering::Relaxed);
        if paused != was_paused {
            if paused {
                played += played_from.elapsed();
            } else {
                played_from = Instant::now();
            }
            was_paused = paused;
        }
        if paused {
            if housekeeping(&mut pipeline, &stats, &RunState::Running, None) {
                return;
            }
            thread::sleep(Duration::from_millis(5));
            continue;
        }
        let Some(rec) = reader.next_record() else {
            break;
        };
        let rec = match rec {
            Ok(r) => r,
            Err(_) => {
                stats.capture_errors += 1;
                continue;
            }
        };
        stats.received += 1;
        let first = *first_ts.get_or_insert_with(|| {
            played = Duration::ZERO;
            played_from = Instant::now();
            rec.ts_ns
        });
        if paced {
            let due = Duration::from_nanos((rec.ts_ns.saturating_sub(first) as f64 / speed) as u64);
            loop {
                let now = played + played_from.elapsed();
                if now >= due || shared.paused.load(Ordering::Relaxed) {
                    break;
                }
                let clock = first + (now.as_nanos() as f64 * speed) as u64;
                if housekeeping(&mut pipeline, &stats, &RunState::Running, Some(clock)) {
                    return;
                }
                thread::sleep((due - now).min(Duration::from_millis(2)));
            }
        }
        let link = LinkType::from(u32::from(rec.linktype));
        pipeline.on_frame(link, rec.ts_ns, rec.data, rec.orig_len);
        if (pipeline.frames().is_multiple_of(1024) || paced)
            && housekeeping(&mut pipeline, &stats, &RunState::Running, None)
        {
            return;
        }
    }
    pipeline.finish();
    let mut finished = true;
    loop {
        let quit = shared.quit.load(Ordering::Relaxed);
        while let Ok(cmd) = rx.try_recv() {
            match cmd {
                Command::Reset => pipeline.reset(),
            }
            finished = true;
        }
        if finished || quit {
            finished = false;
            shared.publish(pipeline.snapshot(wall_ns(start), RunState::Finished, stats));
        }
        if quit {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn widen_counts_past_u32() {
        assert_eq!(widen(0, 5), 5);
        assert_eq!(widen(u64::from(u32::MAX) - 1, 3), (1 << 32) + 3);
        assert_eq!(widen((1 << 32) + 10, 12), (1 << 32) + 12);
    }

    #[test]
    fn default_filter_covers_both_ports_fragments_and_vlan() {
        let f = default_filter(4794, 4791);
        let one = "udp port 4794 or udp dst port 4791 or ip[6:2] & 0x3fff != 0 or ip6[6] = 44 \
                   or ip proto 47 or ip6 proto 47 or udp dst port 4789";
        assert_eq!(f, format!("{one} or (vlan and ({one}))"));
    }
}
