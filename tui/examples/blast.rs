//! Traffic for metaroce-top's tests and benchmark, injected with libpcap
//! on an interface (a veth end): frames are built by `proto_parse`
//! (`Repr::emit`, `UdpFrameBuilder`); this file never touches bytes.
//!
//! - `blast replay IFACE FILE [GAP_US]`: send every frame of a capture, in
//!   order, GAP_US apart (default 200).
//! - `blast rate IFACE PPS SECONDS [PAYLOAD] [PATHS] [LOSS_PER_MILLE] [THREADS]`:
//!   one MetaRoCE connection sprayed over PATHS evs (default 8), PAYLOAD
//!   bytes per DATA (default 1024), an ACK back every 8 DATA, and
//!   LOSS_PER_MILLE (default 1) DATA packets per thousand held back and
//!   sent again 32 packets later with tx_attempt 1 (a path_seq gap on the
//!   first path, a retransmission on another); THREADS senders (default
//!   1), one connection each, share the rate. Prints a JSON line with
//!   what was sent.
//! - `blast write FILE COUNT [PAYLOAD] [PATHS] [LOSS_PER_MILLE]`: the same
//!   traffic (one connection) into a pcap file, frames 1 us apart.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use proto_parse::build::UdpFrameBuilder;
use proto_parse::capture::Reader;
use proto_parse::metaroce::{
    self, AckRepr, Body, DataRepr, FbFlags, FeedbackRepr, Flags, Op, Repr, SackBitmap,
};

fn open(iface: &str) -> anyhow::Result<pcap::Capture<pcap::Active>> {
    let mut cap = pcap::Capture::from_device(iface)?
        .snaplen(64)
        .buffer_size(1 << 20)
        .timeout(10)
        .open()
        .with_context(|| format!("cannot open {iface}"))?;
    // We only send: receive nothing.
    cap.direction(pcap::Direction::In)?;
    cap.filter("udp port 9", true)?;
    Ok(cap)
}

fn replay(iface: &str, file: &str, gap: Duration) -> anyhow::Result<()> {
    let mut cap = open(iface)?;
    let mut reader = Reader::open(file).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let mut sent = 0u64;
    while let Some(rec) = reader.next_record() {
        let Ok(rec) = rec else { continue };
        cap.sendpacket(rec.data)?;
        sent += 1;
        std::thread::sleep(gap);
    }
    println!("{{\"sent\": {sent}}}");
    Ok(())
}

struct Conn {
    a: IpAddr,
    b: IpAddr,
    a_conn: u32,
    b_conn: u32,
    paths: u16,
    psn: u32,
    path_seq: Vec<u16>,
    ack_path_seq: Vec<u16>,
    payload: Vec<u8>,
    start: Instant,
}

impl Conn {
    fn tx_ts(&self) -> u32 {
        self.start.elapsed().as_nanos() as u32
    }

    fn data(&mut self, psn: u32, ev: u16, attempt: u8) -> Vec<u8> {
        let slot = usize::from(ev);
        self.path_seq[slot] = self.path_seq[slot].wrapping_add(1).max(1);
        let len = self.payload.len() as u32;
        let msg_pkts = 16;
        let idx = psn % msg_pkts;
        let mut flags = Flags::empty();
        if idx == 0 {
            flags |= Flags::SOM;
        }
        if idx == msg_pkts - 1 {
            flags |= Flags::EOM | Flags::AR;
        }
        let repr = Repr {
            flags,
            tx_attempt: attempt,
            ev,
            path_seq: self.path_seq[slot],
            dst_conn: self.b_conn,
            src_conn: self.a_conn,
            psn,
            tx_ts: self.tx_ts(),
            body: Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x1000_0000 + u64::from(idx * len),
                    rkey: 0x101,
                },
                payload_len: len as u16,
                msg_id: psn / msg_pkts,
                msg_offset: idx * len,
                msg_len: msg_pkts * len,
            }),
            tlvs: Vec::new(),
            payload: &self.payload,
            crc: false,
        };
        let udp = repr.to_vec();
        UdpFrameBuilder::new(
            SocketAddr::new(self.a, metaroce::udp_source_port(ev)),
            SocketAddr::new(self.b, metaroce::DEFAULT_PORT),
        )
        .build(&udp)
    }

    fn ack(&mut self, cum: u32, echo_psn: u32, ev: u16) -> Vec<u8> {
        let slot = usize::from(ev);
        self.ack_path_seq[slot] = self.ack_path_seq[slot].wrapping_add(1).max(1);
        let ts = self.tx_ts();
        let repr = Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev,
            path_seq: self.ack_path_seq[slot],
            dst_conn: self.a_conn,
            src_conn: self.b_conn,
            psn: cum,
            tx_ts: ts,
            body: Body::Ack(AckRepr {
                feedback: FeedbackRepr {
                    flags: FbFlags::COAL,
                    echo_ev: ev,
                    echo_psn,
                    echo_tx_ts: 0,
                    rx_ts: ts,
                    ..FeedbackRepr::default()
                },
                sack_base: cum,
                sack: SackBitmap::default(),
            }),
            tlvs: Vec::new(),
            payload: &[],
            crc: false,
        };
        let udp = repr.to_vec();
        UdpFrameBuilder::new(
            SocketAddr::new(self.b, metaroce::udp_source_port(ev)),
            SocketAddr::new(self.a, metaroce::DEFAULT_PORT),
        )
        .build(&udp)
    }
}

/// The generated traffic: DATA sprayed over the paths, an ACK every 8,
/// some DATA held back ("lost") and sent again later.
struct Gen {
    c: Conn,
    data: u64,
    held: u64,
    loss_per_mille: u32,
    /// (psn, due data index) of held-back packets.
    pending: std::collections::VecDeque<(u32, u64)>,
    rng: u64,
}

impl Gen {
    fn new(payload: usize, paths: u16, loss_per_mille: u32, conn: u32) -> Gen {
        let paths = paths.max(1);
        Gen {
            c: Conn {
                a: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                b: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                a_conn: 0x100 + conn,
                b_conn: 0x200 + conn,
                paths,
                psn: 1000,
                path_seq: vec![0; usize::from(paths)],
                ack_path_seq: vec![0; usize::from(paths)],
                payload: vec![0x5a; payload],
                start: Instant::now(),
            },
            data: 0,
            held: 0,
            loss_per_mille,
            pending: Default::default(),
            rng: 0x2545_f491_4f6c_dd1d ^ u64::from(conn),
        }
    }

    /// The next frame to send (a held-back DATA yields none).
    fn next_frame(&mut self) -> Option<Vec<u8>> {
        let c = &mut self.c;
        if self
            .pending
            .front()
            .is_some_and(|&(_, due)| due <= self.data)
        {
            let (psn, _) = self.pending.pop_front().unwrap_or_default();
            let ev = ((psn + 1) % u32::from(c.paths)) as u16;
            return Some(c.data(psn, ev, 1));
        }
        self.data += 1;
        if self.data.is_multiple_of(8) {
            let cum = self.pending.front().map_or(c.psn, |&(p, _)| p);
            let echo = c.psn.wrapping_sub(1);
            return Some(c.ack(cum, echo, (echo % u32::from(c.paths)) as u16));
        }
        let psn = c.psn;
        c.psn = c.psn.wrapping_add(1);
        let ev = (psn % u32::from(c.paths)) as u16;
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        if self.loss_per_mille > 0 && (self.rng % 1000) < u64::from(self.loss_per_mille) {
            // Lost on ev: its path_seq moves on, nothing is sent.
            let slot = usize::from(ev);
            c.path_seq[slot] = c.path_seq[slot].wrapping_add(1).max(1);
            self.pending.push_back((psn, self.data + 32));
            self.held += 1;
            return None;
        }
        Some(c.data(psn, ev, 0))
    }
}

fn rate(
    iface: &str,
    pps: f64,
    seconds: f64,
    payload: usize,
    paths: u16,
    loss_per_mille: u32,
    conn: u32,
) -> anyhow::Result<Sent> {
    let mut cap = open(iface)?;
    let mut g = Gen::new(payload, paths, loss_per_mille, conn);
    let start = Instant::now();
    let end = Duration::from_secs_f64(seconds);
    let (mut sent, mut errors) = (0u64, 0u64);
    loop {
        let t = start.elapsed();
        if t >= end {
            break;
        }
        let target = (t.as_secs_f64() * pps) as u64;
        if sent >= target {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        for _ in 0..(target - sent).min(256) {
            let Some(frame) = g.next_frame() else {
                continue;
            };
            if cap.sendpacket(frame).is_err() {
                errors += 1;
            }
            sent += 1;
        }
    }
    Ok(Sent {
        sent,
        held: g.held,
        errors,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The same traffic into a pcap file (COUNT frames, 1 us apart).
fn write(
    file: &str,
    count: u64,
    payload: usize,
    paths: u16,
    loss_per_mille: u32,
) -> anyhow::Result<()> {
    let out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(file)?);
    let mut w = proto_parse::capture::PcapWriter::new(out)?;
    let mut g = Gen::new(payload, paths, loss_per_mille, 0);
    let t0 = 1_764_000_000_000_000_000u64;
    let mut n = 0;
    while n < count {
        if let Some(frame) = g.next_frame() {
            w.write_frame(t0 + n * 1000, &frame)?;
            n += 1;
        }
    }
    w.flush()?;
    println!("{{\"written\": {n}}}");
    Ok(())
}

#[derive(Default)]
struct Sent {
    sent: u64,
    held: u64,
    errors: u64,
    seconds: f64,
}

/// `threads` senders (one connection each) sharing `pps`.
#[allow(clippy::too_many_arguments)]
fn rate_threads(
    iface: &str,
    pps: f64,
    seconds: f64,
    payload: usize,
    paths: u16,
    loss_per_mille: u32,
    threads: u32,
) -> anyhow::Result<()> {
    let threads = threads.max(1);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let iface = iface.to_string();
            std::thread::spawn(move || {
                rate(
                    &iface,
                    pps / f64::from(threads),
                    seconds,
                    payload,
                    paths,
                    loss_per_mille,
                    i,
                )
            })
        })
        .collect();
    let mut total = Sent::default();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("sender thread panicked"))??;
        total.sent += s.sent;
        total.held += s.held;
        total.errors += s.errors;
        total.seconds = total.seconds.max(s.seconds);
    }
    println!(
        "{{\"sent\": {}, \"lost_on_purpose\": {}, \"send_errors\": {}, \"seconds\": {:.3}, \"pps\": {:.0}, \"threads\": {threads}}}",
        total.sent,
        total.held,
        total.errors,
        total.seconds,
        total.sent as f64 / total.seconds
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match arg(0) {
        Some("replay") if args.len() >= 3 => {
            let gap: u64 = arg(3).unwrap_or("200").parse()?;
            replay(&args[1], &args[2], Duration::from_micros(gap))
        }
        Some("write") if args.len() >= 3 => write(
            &args[1],
            args[2].parse()?,
            arg(3).unwrap_or("1024").parse()?,
            arg(4).unwrap_or("8").parse()?,
            arg(5).unwrap_or("1").parse()?,
        ),
        Some("rate") if args.len() >= 4 => rate_threads(
            &args[1],
            args[2].parse()?,
            args[3].parse()?,
            arg(4).unwrap_or("1024").parse()?,
            arg(5).unwrap_or("8").parse()?,
            arg(6).unwrap_or("1").parse()?,
            arg(7).unwrap_or("1").parse()?,
        ),
        _ => bail!(
            "usage: blast replay IFACE FILE [GAP_US] | blast write FILE COUNT [PAYLOAD] [PATHS] [LOSS_PER_MILLE] | blast rate IFACE PPS SECONDS [PAYLOAD] [PATHS] [LOSS_PER_MILLE] [THREADS]"
        ),
    }
}
