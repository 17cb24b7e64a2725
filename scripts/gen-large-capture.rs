//! Writes a large synthetic MetaRoCE capture for the analyzer benchmark
//! (`scripts/bench-analyzer.sh`), streaming, with proto-parse's emitter and
//! `capture::PcapWriter`:
//!
//!     gen-large-capture OUT.pcap PACKETS [CONNECTIONS] [LOSS_PER_MILLE] [PAYLOAD_BYTES]
//!
//! Traffic, as captured at the senders: CONNECTIONS connections (default
//! 8; host pairs 10.1.x.1 -> 10.1.x.2) each send 8-packet WRITE messages
//! (PAYLOAD_BYTES per packet, default 64: 158-byte frames, near the
//! 142-byte frames of the measurements in docs/machine-facts.md) sprayed over 16 evs; the receiver ACKs every
//! 4 DATA packets (cumulative ack + SACK, echoing the latest DATA). A DATA
//! packet is lost with probability LOSS_PER_MILLE / 1000 (default 5): the
//! receiver NACKs the gap (GAP) at the next arrival and the sender
//! retransmits it at once on the next ev with tx_attempt 1. Frames are 100
//! ns apart. Deterministic (fixed xorshift seed).
//!
//! Run through `scripts/gen-large-capture.sh` (builds it as the analyzer's
//! `gen-large-capture` example).

use std::fs::File;
use std::io::BufWriter;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use proto_parse::build::{ECN_ECT0, UdpFrameBuilder};
use proto_parse::capture::PcapWriter;
use proto_parse::metaroce::{
    AckRepr, Body, DEFAULT_PORT, DataRepr, FbFlags, FeedbackRepr, Flags, NackCode, NackRepr, Op,
    Repr, SackBitmap, udp_source_port,
};

const EVS: u16 = 16;
const MSG_PACKETS: u32 = 8;
const GAP_NS: u64 = 100;
const EPOCH_NS: u64 = 1_764_000_000_000_000_000;

struct Conn {
    a: IpAddr,
    b: IpAddr,
    a_conn: u32,
    b_conn: u32,
    next_psn: u32,
    /// Receiver's cumulative ack (next PSN expected).
    cum: u32,
    /// PSNs received above `cum` (the receiver's SACK state).
    above: Vec<u32>,
    msg_id: u32,
    path_seq_a: [u16; EVS as usize],
    path_seq_b: [u16; EVS as usize],
    since_ack: u32,
    /// A lost PSN waiting for its NACK, with its transmission time.
    lost: Option<u32>,
}

struct Out {
    w: PcapWriter<BufWriter<File>>,
    ts: u64,
    frames: u64,
}

impl Out {
    fn frame(&mut self, src: SocketAddr, dst: SocketAddr, repr: &Repr<'_>) -> std::io::Result<u32> {
        self.ts += GAP_NS;
        self.frames += 1;
        let bytes = UdpFrameBuilder::new(src, dst)
            .with_ecn(ECN_ECT0)
            .build(&repr.to_vec());
        self.w.write_frame(EPOCH_NS + self.ts, &bytes)?;
        Ok(self.ts as u32)
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn feedback(echo_psn: u32, echo_ev: u16, echo_tx_ts: u32) -> FeedbackRepr {
    FeedbackRepr {
        flags: FbFlags::empty(),
        echo_ev,
        echo_psn,
        echo_tx_ts,
        rx_ts: echo_tx_ts.wrapping_add(5_000),
        ce_count: 0,
        rx_buf_level: 0,
        fwd_hops: 0,
        credit: u32::MAX,
    }
}

fn header(c: &Conn, from_a: bool, ev: u16, path_seq: u16, psn: u32, body: Body) -> Repr<'static> {
    let (src_conn, dst_conn) = if from_a {
        (c.a_conn, c.b_conn)
    } else {
        (c.b_conn, c.a_conn)
    };
    Repr {
        flags: Flags::empty(),
        tx_attempt: 0,
        ev,
        path_seq,
        dst_conn,
        src_conn,
        psn,
        tx_ts: 0,
        body,
        tlvs: Vec::new(),
        payload: &[],
        crc: false,
    }
}

fn addrs(c: &Conn, from_a: bool, ev: u16) -> (SocketAddr, SocketAddr) {
    let (s, d) = if from_a { (c.a, c.b) } else { (c.b, c.a) };
    (
        SocketAddr::new(s, udp_source_port(ev)),
        SocketAddr::new(d, DEFAULT_PORT),
    )
}

/// The receiver's feedback echoing `(psn, ev, tx_ts)`.
fn send_feedback(
    out: &mut Out,
    c: &mut Conn,
    echo: (u32, u16, u32),
    nack: Option<u32>,
) -> std::io::Result<()> {
    let (psn, ev, tx_ts) = echo;
    let seq = {
        let s = &mut c.path_seq_b[usize::from(ev)];
        *s = s.wrapping_add(1).max(1);
        *s
    };
    let fb = feedback(psn, ev, tx_ts);
    let body = match nack {
        Some(gap) => Body::Nack(NackRepr {
            feedback: fb,
            code: NackCode::Gap,
            rnr_timer: 0,
            nack_psn: gap,
        }),
        None => Body::Ack(AckRepr {
            feedback: fb,
            sack_base: c.cum,
            sack: SackBitmap::from_psns(c.cum, c.above.iter().copied()),
        }),
    };
    let mut repr = header(c, false, ev, seq, c.cum, body);
    repr.tx_ts = tx_ts.wrapping_add(5_500);
    let (src, dst) = addrs(c, false, ev);
    out.frame(src, dst, &repr)?;
    Ok(())
}

/// The receiver got `psn`: advance the cumulative ack over received PSNs.
fn receive(c: &mut Conn, psn: u32) {
    if psn == c.cum {
        c.cum += 1;
        while let Some(i) = c.above.iter().position(|&p| p == c.cum) {
            c.above.swap_remove(i);
            c.cum += 1;
        }
    } else if psn > c.cum && !c.above.contains(&psn) {
        c.above.push(psn);
    }
}

#[allow(clippy::too_many_arguments)]
fn data(
    out: &mut Out,
    c: &mut Conn,
    payload: &[u8],
    psn: u32,
    index: u32,
    msg_id: u32,
    ev: u16,
    attempt: u8,
) -> std::io::Result<u32> {
    let seq = {
        let s = &mut c.path_seq_a[usize::from(ev)];
        *s = s.wrapping_add(1).max(1);
        *s
    };
    let mut flags = Flags::empty();
    flags.set(Flags::SOM, index == 0);
    flags.set(Flags::EOM, index + 1 == MSG_PACKETS);
    let body = Body::Data(DataRepr {
        op: Op::Write {
            remote_va: 0x1000_0000 + u64::from(msg_id) * 0x1_0000,
            rkey: 0x42,
        },
        payload_len: payload.len() as u16,
        msg_id,
        msg_offset: index * payload.len() as u32,
        msg_len: MSG_PACKETS * payload.len() as u32,
    });
    let mut repr = header(c, true, ev, seq, psn, body);
    repr.flags = flags;
    repr.tx_attempt = attempt;
    repr.payload = payload;
    repr.tx_ts = (out.ts + GAP_NS) as u32;
    let (src, dst) = addrs(c, true, ev);
    out.frame(src, dst, &repr)
}

fn run(
    path: &str,
    packets: u64,
    conns: u32,
    loss_per_mille: u64,
    payload_len: usize,
) -> std::io::Result<u64> {
    let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut out = Out {
        w: PcapWriter::new(file)?,
        ts: 0,
        frames: 0,
    };
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut conns: Vec<Conn> = (0..conns)
        .map(|i| Conn {
            a: IpAddr::V4(Ipv4Addr::new(10, 1, (i % 250) as u8, 1)),
            b: IpAddr::V4(Ipv4Addr::new(10, 1, (i % 250) as u8, 2)),
            a_conn: 0x1000 + i,
            b_conn: 0x2000 + i,
            next_psn: 1000,
            cum: 1000,
            above: Vec::new(),
            msg_id: 0,
            path_seq_a: [0; EVS as usize],
            path_seq_b: [0; EVS as usize],
            since_ack: 0,
            lost: None,
        })
        .collect();
    'outer: loop {
        for c in conns.iter_mut() {
            c.msg_id += 1;
            let msg_id = c.msg_id;
            for index in 0..MSG_PACKETS {
                if out.frames >= packets {
                    break 'outer;
                }
                let psn = c.next_psn;
                c.next_psn += 1;
                let ev = ((psn + msg_id) % u32::from(EVS)) as u16;
                let tx_ts = data(&mut out, c, &payload, psn, index, msg_id, ev, 0)?;
                let lost = c.lost.is_none() && rng.next() % 1000 < loss_per_mille;
                if lost {
                    c.lost = Some(psn);
                    continue;
                }
                receive(c, psn);
                c.since_ack += 1;
                if let Some(gap) = c.lost.take() {
                    // The next arrival shows the gap: NACK, retransmit, ACK.
                    send_feedback(&mut out, c, (psn, ev, tx_ts), Some(gap))?;
                    let retx_ev = (ev + 1) % EVS;
                    let gap_index = (gap - 1000) % MSG_PACKETS;
                    let gap_msg = (gap - 1000) / MSG_PACKETS + 1;
                    let rtx_ts = data(&mut out, c, &payload, gap, gap_index, gap_msg, retx_ev, 1)?;
                    receive(c, gap);
                    send_feedback(&mut out, c, (gap, retx_ev, rtx_ts), None)?;
                    c.since_ack = 0;
                } else if c.since_ack >= 4 {
                    send_feedback(&mut out, c, (psn, ev, tx_ts), None)?;
                    c.since_ack = 0;
                }
            }
        }
    }
    out.w.flush()?;
    Ok(out.frames)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!(
            "usage: gen-large-capture OUT.pcap PACKETS [CONNECTIONS] [LOSS_PER_MILLE] [PAYLOAD_BYTES]"
        );
        return ExitCode::from(1);
    };
    let num = |i: usize, default: u64| {
        args.get(i)
            .and_then(|s| s.replace('_', "").parse::<u64>().ok())
            .unwrap_or(default)
    };
    let packets = num(1, 2_000_000);
    let conns = num(2, 8).clamp(1, 1 << 20) as u32;
    let loss = num(3, 5).min(1000);
    let payload = num(4, 64).clamp(1, 8192) as usize;
    match run(path, packets, conns, loss, payload) {
        Ok(frames) => {
            eprintln!("gen-large-capture: wrote {frames} frames to {path}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-large-capture: {path}: {e}");
            ExitCode::from(1)
        }
    }
}
