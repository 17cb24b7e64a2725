//! `--pcap FILE`: every datagram the endpoint sent and received, framed as
//! Ethernet/IPv4/UDP with its ECN bits by `proto_parse::build`, written by
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

    /// Records one UDP payload from `src` to `dst` with IP ECN bits `ecn`.
    pub fn record(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        ecn: u8,
        payload: &[u8],
    ) -> io::Result<()> {
        if src.is_ipv4() != dst.is_ipv4() {
            return Ok(());
        }
        let frame = UdpFrameBuilder::new(src, dst).with_ecn(ecn).build(payload);
        self.frames += 1;
        self.w.write_frame(ts_ns, &frame)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}
