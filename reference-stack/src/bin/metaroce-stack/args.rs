//! The options the subcommands share: transport settings, impairment.

use std::net::IpAddr;

use clap::{Args, ValueEnum};
use reference_stack::impair::{Blackhole, Impairment};
use serde::Serialize;

#[derive(Clone, Copy, ValueEnum, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OpArg {
    Write,
    Read,
    Send,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
pub(crate) enum ModeArg {
    Metaroce,
    Gbn,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
pub(crate) enum MisbehaveArg {
    RetransmitAcked,
    AckBackwards,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
pub(crate) enum SprayArg {
    Rr,
    Weighted,
}

#[derive(Clone, Copy, ValueEnum, Debug, PartialEq, Eq, Default)]
pub(crate) enum ImpairWhere {
    #[default]
    Tx,
    Rx,
    Both,
}

impl OpArg {
    pub(crate) fn name(self) -> &'static str {
        match self {
            OpArg::Write => "write",
            OpArg::Read => "read",
            OpArg::Send => "send",
        }
    }
}

#[derive(Args, Clone, Debug)]
pub(crate) struct Common {
    /// Local address, IPv4 or IPv6 (server default 127.0.0.1, client
    /// 127.0.0.2; an IPv6 client gives its own).
    #[arg(long)]
    pub(crate) bind: Option<IpAddr>,
    /// Our MetaRoCE UDP port [server default: 4794; client default: the
    /// port of --connect].
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// The port peers listen on [default: our own --port; client: the port
    /// of --connect].
    #[arg(long)]
    pub(crate) peer_port: Option<u16>,
    #[arg(long, value_enum, default_value_t = ModeArg::Metaroce)]
    pub(crate) mode: ModeArg,
    #[arg(long, value_enum, default_value_t = SprayArg::Weighted)]
    pub(crate) spray: SprayArg,
    /// Payload MTU (CTRL mtu; both sides use the smaller) [default: the
    /// largest whose packets fit the MTU of the interface toward the peer,
    /// at most 4096]. A value whose packets do not fit is an error: the
    /// stack sends with the don't-fragment bit and never fragments.
    #[arg(long)]
    pub(crate) mtu: Option<u16>,
    /// Test only: accept an --mtu above the path MTU and send without the
    /// don't-fragment bit, so that the kernel fragments.
    #[arg(long, hide = true)]
    pub(crate) allow_fragmentation: bool,
    /// Test only: break the spec on purpose, so that tests can check that
    /// `metaroce-analyze lint` finds it (retransmit-acked: resend PSNs
    /// already acknowledged; ack-backwards: ACKs whose cumulative ack goes
    /// back).
    #[arg(long, hide = true, value_enum)]
    pub(crate) misbehave: Option<MisbehaveArg>,
    #[arg(long)]
    pub(crate) no_crc: bool,
    /// Disable PLB-like path retirement.
    #[arg(long)]
    pub(crate) no_plb: bool,
    #[arg(long, default_value_t = 1000)]
    pub(crate) rto_min_us: u64,
    /// Receiver: ACK after this many DATA packets (or --ack-delay-us).
    #[arg(long, default_value_t = 16)]
    pub(crate) ack_every: u32,
    #[arg(long, default_value_t = 50)]
    pub(crate) ack_delay_us: u64,
    /// Delay-based CC: target fabric delay above the smallest RTT seen.
    #[arg(long, default_value_t = 200)]
    pub(crate) cc_target_us: u64,
    /// Seed of connection ids, initial PSNs and the impairment RNG
    /// (default: from the clock; give one to reproduce a run).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Write every packet sent and received to this pcap file.
    #[arg(long)]
    pub(crate) pcap: Option<std::path::PathBuf>,
    /// Write the ground-truth event log (JSON Lines) to this file.
    #[arg(long)]
    pub(crate) events: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) imp: ImpairArgs,
}

#[derive(Args, Clone, Debug, Default)]
pub(crate) struct ImpairArgs {
    /// Random loss, percent.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) loss: f64,
    /// Loss of one ev, `EV=PERCENT` (repeatable).
    #[arg(long, value_parser = parse_path_loss)]
    pub(crate) path_loss: Vec<(u16, f64)>,
    #[arg(long, default_value_t = 0)]
    pub(crate) delay_us: u64,
    #[arg(long, default_value_t = 0)]
    pub(crate) jitter_us: u64,
    /// Percent of packets held back by --reorder-us.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) reorder: f64,
    #[arg(long, default_value_t = 50)]
    pub(crate) reorder_us: u64,
    /// Duplication, percent.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) dup: f64,
    /// Trimming of DATA payloads, percent.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) trim: f64,
    /// CE marking, percent.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) ce: f64,
    /// Blackhole `EV:START_MS:DURATION_MS` (repeatable).
    #[arg(long, value_parser = parse_blackhole)]
    pub(crate) blackhole: Vec<Blackhole>,
    /// Where impairments apply.
    #[arg(long, value_enum, default_value_t = ImpairWhere::Tx)]
    pub(crate) impair: ImpairWhere,
}

fn parse_path_loss(s: &str) -> Result<(u16, f64), String> {
    let (ev, p) = s.split_once('=').ok_or("expected EV=PERCENT")?;
    Ok((
        ev.parse().map_err(|e| format!("{e}"))?,
        p.parse().map_err(|e| format!("{e}"))?,
    ))
}

fn parse_blackhole(s: &str) -> Result<Blackhole, String> {
    let v: Vec<&str> = s.split(':').collect();
    if v.len() != 3 {
        return Err("expected EV:START_MS:DURATION_MS".into());
    }
    let n = |x: &str| x.parse::<u64>().map_err(|e| format!("{e}"));
    Ok(Blackhole {
        ev: n(v[0])? as u16,
        start: n(v[1])? * 1_000_000,
        duration: n(v[2])? * 1_000_000,
    })
}

impl ImpairArgs {
    pub(crate) fn impairment(&self) -> Impairment {
        Impairment {
            loss: self.loss / 100.0,
            per_ev_loss: self
                .path_loss
                .iter()
                .map(|&(e, p)| (e, p / 100.0))
                .collect(),
            delay: self.delay_us * 1000,
            jitter: self.jitter_us * 1000,
            reorder: self.reorder / 100.0,
            reorder_delay: self.reorder_us * 1000,
            dup: self.dup / 100.0,
            trim: self.trim / 100.0,
            ce: self.ce / 100.0,
            blackholes: self.blackhole.clone(),
        }
    }
}
