//! The owned, `Copy` observation of one captured frame: everything the
//! engine needs, extracted from a decoded frame so that parsing (one thread,
//! or parallel chunks) and analysis (in capture order) can be split, and so
//! that the engine never touches bytes.

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;

use proto_parse::frame::{self, DecodeConfig, Ecn, Frame, LinkType, PortChoice, Transport};
use proto_parse::metaroce::{
    self, CnpReason, CrcStatus, CtrlOp, DataOp, FbFlags, Flags, Layout, NackCode, Packet,
    PacketType, WarningFlags,
};
use proto_parse::mirror::{Mirror, MirrorSource, vxlan};
use proto_parse::rocev2;

/// Where a mirrored frame was copied: its capture point and what the
/// copy said of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MirrorTag {
    pub source: MirrorSource,
    /// ERSPAN III with an IEEE 1588 time: the switch's time of the copy
    /// (ns), taken where the packet was, without the trip to the collector.
    pub switch_ts_ns: Option<u64>,
    /// The switch cut the copy (ERSPAN's T bit).
    pub truncated: bool,
}

impl MirrorTag {
    pub fn of(mirror: &Mirror) -> MirrorTag {
        MirrorTag {
            source: mirror.source(),
            switch_ts_ns: mirror.switch_time.and_then(|t| t.full_ns()),
            truncated: mirror.truncated,
        }
    }
}

/// One frame as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// Frame number (1-based, as tshark's `frame.number`).
    pub frame: u64,
    /// Capture timestamp, ns since the epoch of the capture clock.
    pub ts_ns: u64,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// The two IP ECN bits (`proto_parse::frame::Ecn::from_bits` names
    /// them).
    pub ecn: u8,
    /// The frame (or its headers) could not be decoded as the protocol its
    /// port says; such frames are counted and not analysed further.
    pub malformed: bool,
    pub kind: ObsKind,
}

/// What the UDP payload was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObsKind {
    MetaRoce(MrObs),
    RoceV2(RoceObs),
}

/// The MetaRoCE fields the engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrObs {
    pub ptype: PacketType,
    pub flags: Flags,
    pub tx_attempt: u8,
    pub ev: u16,
    pub path_seq: u16,
    pub dst_conn: u32,
    pub src_conn: u32,
    /// DATA: this packet's PSN; feedback: the cumulative ack.
    pub psn: u32,
    pub tx_ts: u32,
    pub body: MrBody,
    /// The parser's warnings and the CRC trailer's check: only when the
    /// decode asked for them (`DecodeConfig::verify_crc`, which the lint
    /// turns on); empty otherwise.
    pub checks: MrChecks,
}

/// What only the conformance lint reads of a packet's bytes, made when the
/// decode config's `verify_crc` is on (it costs a CRC32C over the packet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MrChecks {
    pub warnings: WarningFlags,
    pub crc: CrcCheck,
    /// IPv6 only: the flow label, when it is not the packet's ev (spec 1:
    /// it SHOULD be); `None` on IPv4 and when the label is the ev.
    pub flow_label_not_ev: Option<FlowLabel>,
}

/// An IPv6 flow label (20 bits) in four bytes with its `None`: an
/// `Option<u32>` would take eight and grow [`MrObs`], which is copied per
/// packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowLabel(NonZeroU32);

impl FlowLabel {
    /// The bit above the label's 20 that makes every label, 0 too, non-zero.
    const MARK: u32 = 1 << 20;

    /// `label` when it is not `ev`.
    pub fn not_ev(label: u32, ev: u16) -> Option<FlowLabel> {
        let label = label & (Self::MARK - 1);
        if label == u32::from(ev) {
            return None;
        }
        NonZeroU32::new(label | Self::MARK).map(FlowLabel)
    }

    /// The 20-bit label.
    pub fn value(self) -> u32 {
        self.0.get() & (Self::MARK - 1)
    }
}

/// The CRC32C trailer's check (spec 7), without the values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CrcCheck {
    /// Not asked for, or the capture does not hold the trailer.
    #[default]
    NotChecked,
    /// No trailer (flags.CRC clear, or trimmed).
    NotPresent,
    Good,
    Bad,
}

impl MrChecks {
    /// Reads a packet whose layout was computed. The CRC32C is read only
    /// when the layout has a trailer (most packets have none: no call).
    #[inline]
    pub fn of<T: AsRef<[u8]>>(packet: &Packet<T>, layout: &Layout) -> MrChecks {
        MrChecks {
            warnings: packet.warning_flags_in(layout),
            crc: match layout.trailer {
                None => CrcCheck::NotPresent,
                Some(_) => Self::crc(packet, layout),
            },
            flow_label_not_ev: None,
        }
    }

    #[cold]
    #[inline(never)]
    fn crc<T: AsRef<[u8]>>(packet: &Packet<T>, layout: &Layout) -> CrcCheck {
        match packet.crc_status(layout) {
            CrcStatus::Good => CrcCheck::Good,
            CrcStatus::Bad { .. } => CrcCheck::Bad,
            CrcStatus::NotPresent => CrcCheck::NotPresent,
            CrcStatus::NotChecked => CrcCheck::NotChecked,
        }
    }
}

/// The type-specific part of a MetaRoCE observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrBody {
    Data(DataObs),
    Feedback(FeedbackObs),
    Ctrl(CtrlObs),
    Probe,
    /// Experimental or unknown type: counted only.
    Other,
    /// The base header (or less) was read, the rest is malformed.
    Malformed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataObs {
    pub op: DataOp,
    /// Payload bytes as sent.
    pub payload_len: u16,
    /// Payload bytes actually carried (shorter when trimmed).
    pub actual_len: u32,
    pub trimmed: bool,
    pub msg_id: u32,
    pub msg_offset: u32,
    pub msg_len: u32,
}

/// Which feedback type, with its own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FbKind {
    Ack {
        sack_base: u32,
        sack_words: u8,
        /// Bit i (from the MSB of word 0) = PSN `sack_base + i` received.
        sack: [u64; 4],
    },
    Nack {
        code: NackCode,
        rnr_timer: u8,
        nack_psn: u32,
    },
    Cnp(CnpReason),
    ProbeReply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackObs {
    pub flags: FbFlags,
    pub echo_ev: u16,
    pub echo_psn: u32,
    /// T1.
    pub echo_tx_ts: u32,
    /// T2.
    pub rx_ts: u32,
    pub ce_count: u16,
    pub credit: u32,
    pub kind: FbKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtrlObs {
    pub op: CtrlOp,
    pub mtu: u16,
    pub init_psn: u32,
    pub features: u32,
    pub ts_unit_ps: u32,
}

/// The RoCEv2 (BTH/AETH/RETH) fields the engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceObs {
    pub opcode: rocev2::Opcode,
    pub dest_qp: u32,
    /// 24-bit PSN.
    pub psn: u32,
    pub ack_req: bool,
    pub fecn: bool,
    pub becn: bool,
    /// AETH syndrome byte, when the opcode carries an AETH.
    pub syndrome: Option<u8>,
    pub msn: u32,
    /// RETH DMA length, when the opcode carries a RETH.
    pub dma_len: Option<u32>,
    /// Payload bytes on the wire without pad.
    pub payload_len: u32,
}

impl MrObs {
    /// Reads a checked MetaRoCE packet whose layout has been computed.
    #[inline(always)]
    pub fn from_packet<T: AsRef<[u8]>>(packet: &Packet<T>, layout: &Layout) -> MrObs {
        MrObs::from_packet_checked(packet, layout, false)
    }

    /// [`MrObs::from_packet`], with its [`MrChecks`] when `checks` asks for
    /// them (and the packet is not malformed). Made here, in the
    /// constructor, not set afterwards: setting them on the built
    /// observation made the compiler move it once more on every packet,
    /// checks asked for or not (`report` paid instructions on every packet
    /// for a field only the lint reads).
    #[inline(always)]
    fn from_packet_checked<T: AsRef<[u8]>>(
        packet: &Packet<T>,
        layout: &Layout,
        checks: bool,
    ) -> MrObs {
        let ptype = packet.packet_type();
        let body = match ptype {
            PacketType::Data => match packet.data() {
                Some(d) => MrBody::Data(DataObs {
                    op: d.op(),
                    payload_len: d.payload_len(),
                    actual_len: layout.payload.len() as u32,
                    trimmed: layout.trimmed,
                    msg_id: d.msg_id(),
                    msg_offset: d.msg_offset(),
                    msg_len: d.msg_len(),
                }),
                None => MrBody::Malformed,
            },
            PacketType::Ack | PacketType::Nack | PacketType::Cnp | PacketType::ProbeReply => {
                match packet.feedback() {
                    Some(fb) => {
                        let kind = match ptype {
                            PacketType::Ack => match packet.ack() {
                                Some(ack) => {
                                    let bitmap = ack.sack();
                                    let mut sack = [0u64; 4];
                                    sack[..bitmap.words().len()].copy_from_slice(bitmap.words());
                                    Some(FbKind::Ack {
                                        sack_base: ack.sack_base(),
                                        sack_words: ack.sack_words().min(4),
                                        sack,
                                    })
                                }
                                None => None,
                            },
                            PacketType::Nack => packet.nack().map(|n| FbKind::Nack {
                                code: n.code(),
                                rnr_timer: n.rnr_timer(),
                                nack_psn: n.nack_psn(),
                            }),
                            PacketType::Cnp => packet.cnp_reason().map(FbKind::Cnp),
                            _ => Some(FbKind::ProbeReply),
                        };
                        match kind {
                            Some(kind) => MrBody::Feedback(FeedbackObs {
                                flags: fb.flags(),
                                echo_ev: fb.echo_ev(),
                                echo_psn: fb.echo_psn(),
                                echo_tx_ts: fb.echo_tx_ts(),
                                rx_ts: fb.rx_ts(),
                                ce_count: fb.ce_count(),
                                credit: fb.credit(),
                                kind,
                            }),
                            None => MrBody::Malformed,
                        }
                    }
                    None => MrBody::Malformed,
                }
            }
            PacketType::Ctrl => match packet.ctrl() {
                Some(c) => MrBody::Ctrl(CtrlObs {
                    op: c.op(),
                    mtu: c.mtu(),
                    init_psn: c.init_psn(),
                    features: c.features().bits(),
                    ts_unit_ps: c.ts_unit_ps(),
                }),
                None => MrBody::Malformed,
            },
            PacketType::Probe => MrBody::Probe,
            PacketType::Experimental | PacketType::Unknown(_) => MrBody::Other,
        };
        MrObs {
            checks: if checks && !matches!(body, MrBody::Malformed) {
                // The warnings read the layout's fixed length only; a copy
                // of the layout is made for the rare trailer alone, so the
                // caller's layout stays in registers (its address is not
                // taken on the common path), not copied to memory per
                // packet.
                MrChecks {
                    warnings: packet.warning_flags_fixed_len(layout.fixed_len),
                    crc: match layout.trailer {
                        None => CrcCheck::NotPresent,
                        Some(_) => MrChecks::crc(packet, &layout.clone()),
                    },
                    // Only IPv4 comes this way (`Observation::decode`'s
                    // fast path): no flow label.
                    flow_label_not_ev: None,
                }
            } else {
                MrChecks::default()
            },
            ptype,
            flags: packet.flags(),
            tx_attempt: packet.tx_attempt(),
            ev: packet.ev(),
            path_seq: packet.path_seq(),
            dst_conn: packet.dst_conn(),
            src_conn: packet.src_conn(),
            psn: packet.psn(),
            tx_ts: packet.tx_ts(),
            body,
        }
    }

    /// Base header only (for packets whose remainder is malformed).
    fn malformed<T: AsRef<[u8]>>(packet: &Packet<T>) -> MrObs {
        MrObs {
            checks: Default::default(),
            ptype: packet.packet_type(),
            flags: packet.flags(),
            tx_attempt: packet.tx_attempt(),
            ev: packet.ev(),
            path_seq: packet.path_seq(),
            dst_conn: packet.dst_conn(),
            src_conn: packet.src_conn(),
            psn: packet.psn(),
            tx_ts: packet.tx_ts(),
            body: MrBody::Malformed,
        }
    }
}

impl RoceObs {
    /// Reads a checked RoCEv2 packet.
    pub fn from_packet<T: AsRef<[u8]>>(packet: &rocev2::Packet<T>) -> RoceObs {
        let packet = packet.as_view();
        let bth = packet.bth();
        RoceObs {
            opcode: packet.opcode(),
            dest_qp: bth.dest_qp(),
            psn: bth.psn() & 0x00FF_FFFF,
            ack_req: bth.ack_req(),
            fecn: bth.fecn(),
            becn: bth.becn(),
            syndrome: packet.aeth().map(|a| a.syndrome_byte()),
            msn: packet.aeth().map_or(0, |a| a.msn()),
            dma_len: packet.reth().map(|r| r.dma_len()),
            payload_len: packet.data_len() as u32,
        }
    }
}

impl Observation {
    /// From a MetaRoCE packet view and its layout (tests, and callers that
    /// decode the outer layers themselves).
    pub fn from_metaroce<T: AsRef<[u8]>>(
        frame: u64,
        ts_ns: u64,
        src: IpAddr,
        dst: IpAddr,
        ecn: u8,
        packet: &Packet<T>,
        layout: &Layout,
    ) -> Observation {
        let mr = MrObs::from_packet(packet, layout);
        Observation {
            frame,
            ts_ns,
            src,
            dst,
            src_port: metaroce::udp_source_port(mr.ev),
            dst_port: metaroce::DEFAULT_PORT,
            ecn: ecn & 3,
            malformed: matches!(mr.body, MrBody::Malformed),
            kind: ObsKind::MetaRoce(mr),
        }
    }

    /// Decodes one captured frame into its observation: the same result as
    /// [`Observation::from_frame`] on `proto_parse::frame::decode`, with the
    /// common frame, plain or mirrored, read without building a `Frame`,
    /// which costs more than the rest of the per-packet analysis. `None`
    /// when the frame is neither MetaRoCE nor RoCEv2.
    ///
    /// A mirrored frame (GRE, ERSPAN, VXLAN) gives the observation of the
    /// frame it carries; [`Observation::decode_common_mirrored`] and
    /// [`Observation::decode_full`] also say where it was mirrored.
    #[inline(always)]
    pub fn decode(
        frame_no: u64,
        ts_ns: u64,
        link: LinkType,
        data: &[u8],
        cfg: &DecodeConfig,
    ) -> Option<Observation> {
        if let Some(decided) = Observation::decode_common(frame_no, ts_ns, link, data, cfg) {
            return decided;
        }
        if let Some((obs, _)) =
            Observation::decode_common_mirrored(frame_no, ts_ns, link, data, cfg)
        {
            return Some(obs);
        }
        Observation::decode_full(frame_no, ts_ns, link, data, cfg).0
    }

    /// The common frame's route of [`Observation::decode`]: `Some` with its
    /// result when the frame is Ethernet / IPv4 / UDP (`frame::ipv4_udp`)
    /// and either a complete, valid MetaRoCE packet or UDP of no protocol
    /// of ours (with the heuristic off); `None` when the frame needs
    /// [`Observation::decode_common_mirrored`] or
    /// [`Observation::decode_full`].
    #[inline(always)]
    pub fn decode_common(
        frame_no: u64,
        ts_ns: u64,
        link: LinkType,
        data: &[u8],
        cfg: &DecodeConfig,
    ) -> Option<Option<Observation>> {
        let udp = frame::ipv4_udp(link, data)?;
        Observation::of_common_udp(frame_no, ts_ns, &udp, cfg)
    }

    /// The common mirror's route of [`Observation::decode`]: a complete,
    /// valid MetaRoCE packet in a common frame (as
    /// [`Observation::decode_common`] takes it) mirrored in Ethernet /
    /// IPv4 / GRE or ERSPAN (`frame::ipv4_mirror`): its observation (with
    /// the collector's time) and where it was mirrored. `None` for any
    /// other frame, which [`Observation::decode_full`] takes (a mirrored
    /// frame of no protocol of ours too: the full decode counts it). The
    /// packet is read by the same code as the plain one's, inlined here.
    #[inline(always)]
    pub fn decode_common_mirrored(
        frame_no: u64,
        ts_ns: u64,
        link: LinkType,
        data: &[u8],
        cfg: &DecodeConfig,
    ) -> Option<(Observation, MirrorTag)> {
        let (udp, tag) = Observation::common_mirrored_udp(link, data)?;
        let obs = Observation::of_common_udp(frame_no, ts_ns, &udp, cfg)??;
        Some((obs, tag))
    }

    /// The outer layers of the common mirror (`frame::ipv4_mirror`) and
    /// those of the common frame it carries (`frame::ipv4_udp`): the
    /// mirrored UDP datagram and where it was mirrored. `None` for any
    /// other frame. With [`Observation::of_common_udp`], the two halves of
    /// [`Observation::decode_common_mirrored`], for a caller that builds
    /// the plain and the mirrored packet's observation in one place.
    #[inline(always)]
    pub fn common_mirrored_udp(
        link: LinkType,
        data: &[u8],
    ) -> Option<(frame::Ipv4Udp<'_>, MirrorTag)> {
        let m = frame::ipv4_mirror(link, data)?;
        let udp = frame::ipv4_udp(LinkType::Ethernet, m.inner)?;
        Some((udp, MirrorTag::of(&m.mirror)))
    }

    /// A common frame's UDP datagram (`frame::ipv4_udp`, plain or
    /// mirrored): `Some(Some(..))` for a complete, valid MetaRoCE packet,
    /// `Some(None)` for UDP of no protocol of ours (with the heuristic
    /// off), `None` for anything else, which [`Observation::decode_full`]
    /// takes.
    #[inline(always)]
    pub fn of_common_udp(
        frame_no: u64,
        ts_ns: u64,
        udp: &frame::Ipv4Udp<'_>,
        cfg: &DecodeConfig,
    ) -> Option<Option<Observation>> {
        let choice = cfg.port_choice(udp.src_port, udp.dst_port);
        if choice == PortChoice::MetaRoce {
            // Complete and valid: what `parse_lax` returns without a stop.
            let packet = Packet::new_unchecked(udp.payload);
            let layout = (udp.payload.len() == udp.payload_wire_len)
                .then(|| packet.layout(udp.payload_wire_len).ok())
                .flatten();
            if let Some(layout) = layout {
                let mr = MrObs::from_packet_checked(&packet, &layout, cfg.verify_crc);
                return Some(Some(Observation {
                    frame: frame_no,
                    ts_ns,
                    src: IpAddr::V4(udp.src),
                    dst: IpAddr::V4(udp.dst),
                    src_port: udp.src_port,
                    dst_port: udp.dst_port,
                    ecn: udp.ecn.bits(),
                    malformed: matches!(mr.body, MrBody::Malformed),
                    kind: ObsKind::MetaRoce(mr),
                }));
            }
        } else if choice == PortChoice::Unknown && !cfg.heuristic && udp.dst_port != vxlan::UDP_PORT
        {
            return Some(None); // other UDP
        }
        None
    }

    /// Any frame, through `proto_parse::frame::decode`: its observation (of
    /// the frame it carries, when mirrored) and, when mirrored, where. The
    /// route of the frames the common routes leave.
    #[inline(never)]
    pub fn decode_full(
        frame_no: u64,
        ts_ns: u64,
        link: LinkType,
        data: &[u8],
        cfg: &DecodeConfig,
    ) -> (Option<Observation>, Option<MirrorTag>) {
        frame::decode_with(link, data, cfg, |frame| {
            (
                Observation::from_frame_checked(frame_no, ts_ns, frame, cfg),
                frame.mirror.as_ref().map(MirrorTag::of),
            )
        })
    }

    /// [`Observation::from_frame`], with the MetaRoCE packet's
    /// [`MrChecks`] when `cfg.verify_crc` asks for them.
    pub fn from_frame_checked(
        frame_no: u64,
        ts_ns: u64,
        frame: &Frame<'_>,
        cfg: &DecodeConfig,
    ) -> Option<Observation> {
        let mut obs = Observation::from_frame(frame_no, ts_ns, frame)?;
        if cfg.verify_crc
            && let (ObsKind::MetaRoce(mr), Transport::MetaRoce(lax)) =
                (&mut obs.kind, &frame.payload)
            && let (Some(packet), Some(layout)) = (&lax.packet, &lax.layout)
            && !obs.malformed
        {
            mr.checks = MrChecks::of(packet, layout);
            mr.checks.flow_label_not_ev = frame
                .ip
                .as_ref()
                .and_then(|ip| ip.flow_label)
                .and_then(|label| FlowLabel::not_ev(label, mr.ev));
        }
        Some(obs)
    }

    /// From a frame decoded by `proto_parse::frame::decode`. `None` when the
    /// frame is neither MetaRoCE nor RoCEv2 (count it with
    /// [`crate::Engine::ingest_other`]).
    #[inline]
    pub fn from_frame(frame_no: u64, ts_ns: u64, frame: &Frame<'_>) -> Option<Observation> {
        let ip = frame.ip.as_ref();
        let udp = frame.udp.as_ref();
        let unspecified = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let (src, dst, ecn) = ip.map_or((unspecified, unspecified, 0), |ip| {
            (ip.src, ip.dst, ip.ecn.bits())
        });
        let (src_port, dst_port) = udp.map_or((0, 0), |u| (u.src_port, u.dst_port));
        // A cut capture (snaplen) is not malformed: the headers were read.
        let broken = frame
            .error
            .as_ref()
            .is_some_and(|e| !e.is_capture_truncation());
        let (kind, malformed) = match &frame.payload {
            Transport::MetaRoce(lax) => match (&lax.packet, &lax.layout) {
                (Some(packet), Some(layout)) if !broken => {
                    let mr = MrObs::from_packet(packet, layout);
                    let bad = matches!(mr.body, MrBody::Malformed);
                    (ObsKind::MetaRoce(mr), bad)
                }
                (Some(packet), _) => (ObsKind::MetaRoce(MrObs::malformed(packet)), true),
                // Not even the base header: malformed, or cut by the snaplen;
                // either way nothing to analyse.
                (None, _) => (
                    ObsKind::MetaRoce(MrObs {
                        checks: Default::default(),
                        ptype: PacketType::Unknown(0xFF),
                        flags: Flags::empty(),
                        tx_attempt: 0,
                        ev: 0,
                        path_seq: 0,
                        dst_conn: 0,
                        src_conn: 0,
                        psn: 0,
                        tx_ts: 0,
                        body: MrBody::Malformed,
                    }),
                    true,
                ),
            },
            Transport::RoceV2(r) => match &r.packet {
                Some(p) => (ObsKind::RoceV2(RoceObs::from_packet(p)), broken),
                None => (
                    ObsKind::RoceV2(RoceObs {
                        opcode: rocev2::Opcode::Unknown(0xFF),
                        dest_qp: 0,
                        psn: 0,
                        ack_req: false,
                        fecn: false,
                        becn: false,
                        syndrome: None,
                        msn: 0,
                        dma_len: None,
                        payload_len: 0,
                    }),
                    true,
                ),
            },
            Transport::Other => return None,
        };
        Some(Observation {
            frame: frame_no,
            ts_ns,
            src,
            dst,
            src_port,
            dst_port,
            ecn,
            malformed,
            kind,
        })
    }

    /// True when the IP header carried ECN CE.
    pub fn ce(&self) -> bool {
        Ecn::from_bits(self.ecn) == Ecn::Ce
    }
}

#[cfg(test)]
mod test {
    use std::path::Path;

    use proto_parse::capture::Reader;

    use super::*;

    /// `Observation::decode` (with its fast path) gives what `from_frame`
    /// gives on the full `frame::decode`.
    fn assert_same(link: LinkType, data: &[u8], cfg: &DecodeConfig) {
        let slow = frame::decode_with(link, data, cfg, |f| {
            Observation::from_frame_checked(7, 9, f, cfg)
        });
        assert_eq!(
            Observation::decode(7, 9, link, data, cfg),
            slow,
            "{data:02x?}"
        );
        // The common mirror's route also says where, as the full decode does.
        if let Some((obs, tag)) = Observation::decode_common_mirrored(7, 9, link, data, cfg) {
            let full = Observation::decode_full(7, 9, link, data, cfg);
            assert_eq!((Some(obs), Some(tag)), full, "{data:02x?}");
        }
    }

    #[test]
    fn the_fast_decode_agrees_with_the_full_decode_on_every_fixture_and_mutation() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut fast_hits = 0;
        for dir in ["generated", "real"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "pcap") {
                    continue;
                }
                let mut reader = Reader::open(&path).unwrap();
                let mut mutated = 0;
                while let Some(record) = reader.next_record() {
                    let Ok(record) = record else { continue };
                    let link = LinkType::from(u32::from(record.linktype));
                    for cfg in [
                        DecodeConfig::default(),
                        DecodeConfig {
                            heuristic: true,
                            metaroce_port: 5000,
                            ..DecodeConfig::default()
                        },
                    ] {
                        assert_same(link, record.data, &cfg);
                    }
                    let cfg = DecodeConfig::default();
                    if frame::ipv4_udp(link, record.data).is_some() {
                        fast_hits += 1;
                    }
                    // Every byte of the first frames, changed: a corrupt
                    // header must fall back to the full decode.
                    if mutated < 3 {
                        mutated += 1;
                        let mut data = record.data.to_vec();
                        for at in 0..data.len().min(160) {
                            let keep = data[at];
                            for value in [0x00, 0xFF, keep ^ 0x01, keep ^ 0x80] {
                                data[at] = value;
                                assert_same(link, &data, &cfg);
                            }
                            data[at] = keep;
                        }
                        for len in 0..data.len() {
                            assert_same(link, &data[..len], &cfg);
                        }
                    }
                }
            }
        }
        assert!(fast_hits > 100, "the fast path was taken {fast_hits} times");
    }

    /// The observation is copied per packet (the report's instructions per
    /// packet depend on its size): the lint's facts fit in `MrObs`'s
    /// padding, and a field that grows it is a decision, not an accident.
    #[test]
    fn the_observation_does_not_grow() {
        assert_eq!(std::mem::size_of::<MrChecks>(), 8);
        assert_eq!(std::mem::size_of::<MrObs>(), 96);
        assert_eq!(std::mem::size_of::<Observation>(), 152);
    }

    #[test]
    fn a_flow_label_is_kept_only_when_it_is_not_the_ev() {
        assert_eq!(FlowLabel::not_ev(7, 7), None);
        assert_eq!(FlowLabel::not_ev(0, 0), None);
        assert_eq!(FlowLabel::not_ev(0, 7).map(FlowLabel::value), Some(0));
        assert_eq!(
            FlowLabel::not_ev(0xF_FFFF, 0xFFFF).map(FlowLabel::value),
            Some(0xF_FFFF)
        );
        assert_eq!(
            FlowLabel::not_ev(0x1_0007, 7).map(FlowLabel::value),
            Some(0x1_0007)
        );
    }
}
