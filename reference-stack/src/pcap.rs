//! `--pcap FILE`: every datagram the endpoint sent and received, framed as
//! Ethernet/IPv4 or IPv6/UDP with its ECN bits (and IPv6 flow label) by
//! `proto_parse::build`, written by
//! `proto_parse::capture::PcapWriter` (nanosecond pcap).

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::SocketAddr;
use std::path::Path;

use proto_parse::build::UdpFrameBuilder;
use proto_parse::capture::PcapWriter;

pub struct PcapSink {
    w: PcapWriter<BufWriter<File>>,
    pub frames: u64,
}

impl PcapSink {
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Ok(PcapSink {
            w: PcapWriter::create(path)?,
            frames: 0,
        })
    }

    /// Records one UDP payload from `src` to `dst` with IP ECN bits `ecn`
    /// and, on IPv6, `flow_label`.
    pub fn record(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        ecn: u8,
        flow_label: u32,
        payload: &[u8],
    ) -> io::Result<()> {
        if src.is_ipv4() != dst.is_ipv4() {
            return Ok(());
        }
        let frame = UdpFrameBuilder::new(src, dst)
            .with_ecn(ecn)
            .with_flow_label(flow_label)
            .build(payload);
        self.frames += 1;
        self.w.write_frame(ts_ns, &frame)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}
