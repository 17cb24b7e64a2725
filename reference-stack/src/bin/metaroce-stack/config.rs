//! From the arguments to the core's and the driver's configuration: the
//! payload MTU a path allows, ports, seed.

use std::net::{IpAddr, SocketAddr};

use anyhow::{Context, bail};
use proto_parse::metaroce::DEFAULT_PORT;
use reference_stack::driver::{
    DriverConfig, MAX_DEFAULT_MTU, interface_mtu, payload_mtu, route_mtu,
};
use reference_stack::impair::Impairment;
use reference_stack::{Config, MIN_MTU, Misbehaviour, Mode, Spray};

use crate::args::{Common, ImpairWhere, MisbehaveArg, ModeArg, SprayArg};

/// The IP MTU toward the peer and where it was read, for messages.
pub(crate) struct PathMtu {
    ip_mtu: u32,
    source: String,
}

/// The payload MTU of one side: `--mtu`, refused when its packets do not
/// fit `path`, or else the largest that fits (at most 4096).
pub(crate) fn payload_mtu_of(
    c: &Common,
    ip: IpAddr,
    path: Option<&PathMtu>,
) -> anyhow::Result<u16> {
    let fits = path.map(|p| payload_mtu(p.ip_mtu, ip, !c.no_crc));
    match (c.mtu, path, fits) {
        (Some(mtu), Some(p), Some(fits)) if u32::from(mtu) > fits && !c.allow_fragmentation => {
            bail!(
                "--mtu {mtu} does not fit {}: its DATA packets would need {} bytes of IP MTU, \
                 and the stack sends with the don't-fragment bit (it never fragments). Use \
                 --mtu {fits} or less, or leave --mtu out for the largest that fits",
                p.source,
                u32::from(mtu) + p.ip_mtu - fits
            )
        }
        (Some(mtu), ..) => Ok(mtu),
        (None, Some(p), Some(fits)) if fits < u32::from(MIN_MTU) => {
            bail!("{} is too small for MetaRoCE DATA packets", p.source)
        }
        (None, _, fits) => Ok(fits.map_or(MAX_DEFAULT_MTU, |f| {
            f.min(u32::from(MAX_DEFAULT_MTU)) as u16
        })),
    }
}

/// A server's path MTU: that of the interface holding its address.
pub(crate) fn server_path_mtu(bind: IpAddr) -> anyhow::Result<Option<PathMtu>> {
    let found = interface_mtu(bind).with_context(|| format!("reading the MTU of {bind}"))?;
    Ok(found.map(|(name, mtu)| PathMtu {
        ip_mtu: mtu,
        source: format!("the MTU {mtu} of {name}, the interface of {bind}"),
    }))
}

/// A client's path MTU: that of the route to the server.
pub(crate) fn client_path_mtu(bind: IpAddr, server: SocketAddr) -> anyhow::Result<PathMtu> {
    let mtu =
        route_mtu(bind, server).with_context(|| format!("no route from {bind} to {server}"))?;
    Ok(PathMtu {
        ip_mtu: mtu,
        source: format!("the MTU {mtu} of the route from {bind} to {}", server.ip()),
    })
}

pub(crate) fn core_config(c: &Common, evs: Vec<u16>, trace: bool, mtu: u16) -> Config {
    Config {
        mode: match c.mode {
            ModeArg::Metaroce => Mode::MetaRoce,
            ModeArg::Gbn => Mode::GoBackN,
        },
        spray: match c.spray {
            SprayArg::Rr => Spray::RoundRobin,
            SprayArg::Weighted => Spray::Weighted,
        },
        evs,
        mtu,
        crc: !c.no_crc,
        plb: !c.no_plb,
        rto_min: c.rto_min_us * 1000,
        rto_initial: (c.rto_min_us * 2000).max(2_000_000),
        cc_target_headroom: c.cc_target_us * 1000,
        ack_every: c.ack_every.max(1),
        ack_delay: c.ack_delay_us * 1000,
        trace,
        misbehave: c.misbehave.map(|m| match m {
            MisbehaveArg::RetransmitAcked => Misbehaviour::RetransmitAcked,
            MisbehaveArg::AckBackwards => Misbehaviour::AckBackwards,
        }),
        ..Config::default()
    }
}

pub(crate) fn seed_of(c: &Common) -> u64 {
    c.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // One value per process: the clock read once.
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *SEED.get_or_init(|| t ^ u64::from(std::process::id()).rotate_left(32))
    })
}

/// The MetaRoCE ports of one side: ours (where we receive) and the peers'.
/// One port for everyone is the common case: a server's peers listen on
/// the server's own port unless `--peer-port` says otherwise, and a client
/// listens on the port it connects to unless `--port` says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ports {
    pub(crate) ours: u16,
    pub(crate) peers: u16,
}

impl Ports {
    pub(crate) fn server(c: &Common) -> Ports {
        let ours = c.port.unwrap_or(DEFAULT_PORT);
        Ports {
            ours,
            peers: c.peer_port.unwrap_or(ours),
        }
    }

    pub(crate) fn client(c: &Common, connect: SocketAddr) -> Ports {
        Ports {
            ours: c.port.unwrap_or(connect.port()),
            peers: c.peer_port.unwrap_or(connect.port()),
        }
    }
}

pub(crate) fn driver_config(c: &Common, bind: IpAddr, ports: Ports) -> DriverConfig {
    let imp = c.imp.impairment();
    DriverConfig {
        bind,
        port: ports.ours,
        peer_port: ports.peers,
        impair_tx: if c.imp.impair != ImpairWhere::Rx {
            imp.clone()
        } else {
            Impairment::default()
        },
        impair_rx: if c.imp.impair != ImpairWhere::Tx {
            imp
        } else {
            Impairment::default()
        },
        seed: seed_of(c),
        pcap: c.pcap.clone(),
        events: c.events.clone(),
        dont_fragment: !c.allow_fragmentation,
        ..DriverConfig::default()
    }
}
