//! What the plugin registers with Wireshark, as plain data: header fields
//! (spec section 10 names), subtree kinds and expert infos. `ffi` turns these
//! tables into `hf_register_info` / `ei_register_info` arrays once, at
//! registration; `decode` refers to them by the [`Hf`], [`Ett`] and [`Ei`]
//! enums. Value names come from `proto_parse::metaroce` (`VALUES` tables), so
//! the plugin holds no copy of the wire vocabulary.

use std::ffi::CStr;

use proto_parse::metaroce::{
    CcAlgo, CnpReason, CtrlOp, DataOp, FbFlags, Features, Flags, NackCode, PacketType, PathState,
    TlvType,
};

/// Field types the plugin uses (mapped to Wireshark's `FT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    U8,
    U16,
    U32,
    U64,
    /// `FT_BOOLEAN` over a parent field of this many bits.
    Bool(u8),
    Bytes,
    Str,
    /// `FT_NONE`: a marker (e.g. `metaroce.analysis.trimmed`).
    Marker,
    /// `FT_RELATIVE_TIME` (seconds, from a value in ns).
    Time,
    /// `FT_FRAMENUM`: a link to another frame.
    FrameNum,
}

/// Display base (mapped to Wireshark's `BASE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Dec,
    Hex,
    /// No base (bytes, strings, booleans, markers).
    NoBase,
}

/// Where a field's value names come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    No,
    /// A `VALUES` table of `proto_parse::metaroce`.
    Table(&'static [(u8, &'static str)]),
    /// Wireshark's own `proto_checksum_vals` (for `metaroce.crc.status`).
    ChecksumStatus,
    /// The names of the set flags of a flags octet, one entry for each of
    /// the 256 values (`crate::decode::flag_names`): the label reads
    /// "Flags: SOM,CRC (0x44)", formatted by Wireshark only when shown.
    FlagNames(FlagSet),
    /// `BASE_CUSTOM`: Wireshark asks `crate::decode::custom_label` for the
    /// label text when (and only when) the item is shown; the value itself
    /// prints in decimal (`-T fields`, filters).
    Custom(Custom),
}

/// Which flags octet a [`Names::FlagNames`] table names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagSet {
    /// Base header `flags`.
    Base,
    /// Feedback block `fb_flags`.
    Feedback,
}

/// Labels computed on demand ([`Names::Custom`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Custom {
    /// A length in 4-byte words: "13 words (52 bytes)".
    Words,
    /// The RNR timer in units of 10 us: "5 (50 us)".
    RnrTimer,
    /// A credit, 0xFFFFFFFF meaning "not credit-limited".
    Credit,
}

/// One header field.
#[derive(Debug, Clone, Copy)]
pub struct FieldDef {
    pub abbrev: &'static CStr,
    pub name: &'static CStr,
    pub kind: Kind,
    pub base: Base,
    pub names: Names,
    pub mask: u64,
    pub blurb: Option<&'static CStr>,
}

macro_rules! fields {
    ($( $(#[$m:meta])* $id:ident = ($abbrev:literal, $name:literal, $kind:expr, $base:ident, $names:expr, $mask:expr, $blurb:expr) ),* $(,)?) => {
        /// Every header field the plugin registers, in registration order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Hf { $( $(#[$m])* $id ),* }

        /// The definitions, indexed by `Hf as usize`.
        pub const FIELDS: &[FieldDef] = &[ $( FieldDef {
            abbrev: $abbrev,
            name: $name,
            kind: $kind,
            base: Base::$base,
            names: $names,
            mask: $mask,
            blurb: $blurb,
        } ),* ];
    };
}

const fn tf(flag: u8) -> u64 {
    flag as u64
}

use Kind::*;
use Names::{ChecksumStatus, Custom as Lazy, FlagNames, No, Table};

fields! {
    // Base header (spec section 2).
    Version = (c"metaroce.version", c"Version", U8, Dec, No, 0xF0, None),
    Type = (c"metaroce.type", c"Type", U8, Dec, Table(PacketType::VALUES), 0x0F, None),
    Flags = (c"metaroce.flags", c"Flags", U8, Hex, FlagNames(FlagSet::Base), 0, None),
    FlagAr = (c"metaroce.flags.ar", c"AR (ack requested)", Bool(8), NoBase, No, tf(Flags::AR.bits()), None),
    FlagSom = (c"metaroce.flags.som", c"SOM (start of message)", Bool(8), NoBase, No, tf(Flags::SOM.bits()), None),
    FlagEom = (c"metaroce.flags.eom", c"EOM (end of message)", Bool(8), NoBase, No, tf(Flags::EOM.bits()), None),
    FlagSe = (c"metaroce.flags.se", c"SE (solicited event)", Bool(8), NoBase, No, tf(Flags::SE.bits()), None),
    FlagExt = (c"metaroce.flags.ext", c"EXT (TLVs present)", Bool(8), NoBase, No, tf(Flags::EXT.bits()), None),
    FlagCrc = (c"metaroce.flags.crc", c"CRC (trailer present)", Bool(8), NoBase, No, tf(Flags::CRC.bits()), None),
    FlagsReserved = (c"metaroce.flags.reserved", c"Reserved", U8, Hex, No, tf(Flags::RESERVED), None),
    Hlen = (c"metaroce.hlen", c"Header length", U8, Dec, Lazy(Custom::Words), 0,
        Some(c"Header length in 4-byte words: base + type header + TLVs")),
    TxAttempt = (c"metaroce.tx_attempt", c"Transmission attempt", U8, Dec, No, 0xF0,
        Some(c"0 = original transmission; n = n-th retransmission of this PSN")),
    Ev = (c"metaroce.ev", c"Entropy value (path)", U16, Dec, No, 0, None),
    PathSeq = (c"metaroce.path_seq", c"Path sequence", U16, Dec, No, 0, None),
    DstConn = (c"metaroce.dst_conn", c"Destination connection", U32, Hex, No, 0, None),
    SrcConn = (c"metaroce.src_conn", c"Source connection", U32, Hex, No, 0, None),
    Conn = (c"metaroce.conn", c"Connection", U32, Hex, No, 0,
        Some(c"Either connection id (hidden: metaroce.conn == 0x11 matches both directions)")),
    Psn = (c"metaroce.psn", c"PSN", U32, Dec, No, 0,
        Some(c"DATA: this packet's PSN; feedback: the cumulative ack; PROBE: the probe sequence number")),
    TxTs = (c"metaroce.tx_ts", c"Transmit timestamp", U32, Dec, No, 0, None),

    // The type headers: presence markers heading their subtrees
    // (`metaroce.ack` matches every packet with an ACK header).
    DataHeader = (c"metaroce.data", c"DATA header", Marker, NoBase, No, 0, None),
    AckHeader = (c"metaroce.ack", c"ACK header", Marker, NoBase, No, 0, None),
    NackHeader = (c"metaroce.nack", c"NACK header", Marker, NoBase, No, 0, None),
    CnpHeader = (c"metaroce.cnp", c"CNP header", Marker, NoBase, No, 0, None),
    FbHeader = (c"metaroce.fb", c"Feedback header", Marker, NoBase, No, 0,
        Some(c"The feedback block of a packet with no type-specific part (PROBE_REPLY)")),
    CtrlHeader = (c"metaroce.ctrl", c"CTRL header", Marker, NoBase, No, 0, None),

    // DATA (section 3).
    DataOp = (c"metaroce.data.op", c"Operation", U8, Hex, Table(DataOp::VALUES), 0, None),
    PayloadLen = (c"metaroce.data.payload_len", c"Payload length", U16, Dec, No, 0,
        Some(c"Payload bytes as sent (before any trimming)")),
    MsgId = (c"metaroce.data.msg_id", c"Message id", U32, Dec, No, 0, None),
    MsgOffset = (c"metaroce.data.msg_offset", c"Message offset", U32, Dec, No, 0, None),
    MsgLen = (c"metaroce.data.msg_len", c"Message length", U32, Dec, No, 0, None),
    RemoteVa = (c"metaroce.data.remote_va", c"Remote virtual address", U64, Hex, No, 0, None),
    Rkey = (c"metaroce.data.rkey", c"Remote key", U32, Hex, No, 0, None),
    ImmData = (c"metaroce.data.imm_data", c"Immediate data", U32, Hex, No, 0, None),
    PayloadActual = (c"metaroce.data.payload_actual", c"Actual payload length", U32, Dec, No, 0,
        Some(c"Payload bytes carried (from the UDP length); shorter than payload_len when trimmed")),

    // Feedback block (section 4).
    FbFlags = (c"metaroce.fb.flags", c"Feedback flags", U8, Hex, FlagNames(FlagSet::Feedback), 0, None),
    FbEce = (c"metaroce.fb.flags.ece", c"ECE (trigger was CE-marked)", Bool(8), NoBase, No, tf(FbFlags::ECE.bits()), None),
    FbTrim = (c"metaroce.fb.flags.trim", c"TRIM (trigger arrived trimmed)", Bool(8), NoBase, No, tf(FbFlags::TRIM.bits()), None),
    FbDup = (c"metaroce.fb.flags.dup", c"DUP (trigger was a duplicate)", Bool(8), NoBase, No, tf(FbFlags::DUP.bits()), None),
    FbCoal = (c"metaroce.fb.flags.coal", c"COAL (coalesced feedback)", Bool(8), NoBase, No, tf(FbFlags::COAL.bits()), None),
    FbReserved = (c"metaroce.fb.flags.reserved", c"Reserved", U8, Hex, No, tf(FbFlags::RESERVED), None),
    SackWords = (c"metaroce.fb.sack_words", c"SACK words", U8, Dec, No, 0, None),
    EchoEv = (c"metaroce.fb.echo_ev", c"Echoed entropy value", U16, Dec, No, 0, None),
    EchoPsn = (c"metaroce.fb.echo_psn", c"Echoed PSN", U32, Dec, No, 0, None),
    EchoTxTs = (c"metaroce.fb.echo_tx_ts", c"Echoed transmit timestamp (T1)", U32, Dec, No, 0, None),
    RxTs = (c"metaroce.fb.rx_ts", c"Receive timestamp (T2)", U32, Dec, No, 0, None),
    CeCount = (c"metaroce.fb.ce_count", c"CE count", U16, Dec, No, 0, None),
    RxBufLevel = (c"metaroce.fb.rx_buf_level", c"Receive buffer level", U8, Dec, No, 0, None),
    FwdHops = (c"metaroce.fb.fwd_hops", c"Forward hops", U8, Dec, No, 0, None),
    Credit = (c"metaroce.fb.credit", c"Credit", U32, Dec, Lazy(Custom::Credit), 0,
        Some(c"Bytes the sender may send beyond the cumulative ack; 0xFFFFFFFF = not credit-limited")),

    // ACK.
    SackBase = (c"metaroce.ack.sack_base", c"SACK base", U32, Dec, No, 0, None),
    SackBitmap = (c"metaroce.ack.sack_bitmap", c"SACK bitmap", Bytes, NoBase, No, 0, None),
    SackRanges = (c"metaroce.ack.sack_ranges", c"SACKed PSN ranges", Str, NoBase, No, 0,
        Some(c"PSN ranges the bitmap reports received (inclusive)")),

    // NACK.
    NackCode = (c"metaroce.nack.code", c"NACK code", U8, Hex, Table(NackCode::VALUES), 0, None),
    RnrTimer = (c"metaroce.nack.rnr_timer", c"RNR timer", U8, Dec, Lazy(Custom::RnrTimer), 0,
        Some(c"RNR back-off in units of 10 us")),
    NackPsn = (c"metaroce.nack.psn", c"NACK PSN", U32, Dec, No, 0, None),

    // CNP.
    CnpReason = (c"metaroce.cnp.reason", c"CNP reason", U8, Dec, Table(CnpReason::VALUES), 0, None),

    // CTRL (section 5).
    CtrlOp = (c"metaroce.ctrl.op", c"Control operation", U8, Dec, Table(CtrlOp::VALUES), 0, None),
    CcAlgo = (c"metaroce.ctrl.cc_algo", c"Congestion control algorithm", U8, Dec, Table(CcAlgo::VALUES), 0, None),
    Mtu = (c"metaroce.ctrl.mtu", c"MTU (payload)", U16, Dec, No, 0, None),
    InitPsn = (c"metaroce.ctrl.init_psn", c"Initial PSN", U32, Dec, No, 0, None),
    Features = (c"metaroce.ctrl.features", c"Features", U32, Hex, No, 0, None),
    FeatCrc = (c"metaroce.ctrl.features.crc", c"CRC", Bool(32), NoBase, No, Features::CRC.bits() as u64, None),
    FeatPathSeq = (c"metaroce.ctrl.features.path_seq", c"path_seq", Bool(32), NoBase, No, Features::PATH_SEQ.bits() as u64, None),
    FeatTelemetry = (c"metaroce.ctrl.features.telemetry", c"Telemetry TLVs", Bool(32), NoBase, No, Features::TELEMETRY_TLVS.bits() as u64, None),
    FeatTrimAware = (c"metaroce.ctrl.features.trimming_aware", c"Trimming-aware", Bool(32), NoBase, No, Features::TRIMMING_AWARE.bits() as u64, None),
    FeatClockSync = (c"metaroce.ctrl.features.clocks_synchronised", c"Clocks synchronised", Bool(32), NoBase, No, Features::CLOCKS_SYNCHRONISED.bits() as u64, None),
    TsUnitPs = (c"metaroce.ctrl.ts_unit_ps", c"Timestamp unit (ps)", U32, Dec, No, 0, None),

    // TLVs (section 6).
    TlvType = (c"metaroce.tlv.type", c"TLV type", U8, Dec, Table(TlvType::VALUES), 0, None),
    TlvLen = (c"metaroce.tlv.len", c"TLV length", U8, Dec, Lazy(Custom::Words), 0,
        Some(c"TLV length in 4-byte words, type and len included")),
    TlvValue = (c"metaroce.tlv.value", c"TLV value", Bytes, NoBase, No, 0, None),
    HopSwitchId = (c"metaroce.tlv.hop.switch_id", c"Switch id", U32, Hex, No, 0, None),
    HopQueueDepth = (c"metaroce.tlv.hop.queue_depth", c"Queue depth (cells)", U16, Dec, No, 0, None),
    HopLatency = (c"metaroce.tlv.hop.hop_latency", c"Hop latency (ns)", U16, Dec, No, 0, None),
    PathEv = (c"metaroce.tlv.path.ev", c"Path entropy value", U16, Dec, No, 0, None),
    PathStateF = (c"metaroce.tlv.path.state", c"Path state", U8, Dec, Table(PathState::VALUES), 0, None),
    Ts64 = (c"metaroce.tlv.ts64", c"64-bit transmit timestamp (ns)", U64, Dec, No, 0, None),
    TlvPadding = (c"metaroce.tlv.padding", c"Padding", Bytes, NoBase, No, 0, None),
    HeaderPadding = (c"metaroce.padding", c"Header padding", Bytes, NoBase, No, 0,
        Some(c"Header bytes after the fixed part without flags.EXT")),

    // Integrity (section 7).
    Crc = (c"metaroce.crc", c"CRC32C", U32, Hex, No, 0, None),
    CrcStatus = (c"metaroce.crc.status", c"CRC32C status", U8, NoBase, ChecksumStatus, 0, None),

    // Per-packet derived values.
    Trimmed = (c"metaroce.analysis.trimmed", c"Trimmed by a switch", Marker, NoBase, No, 0,
        Some(c"The payload is shorter than payload_len (spec 11.1)")),

    // Sequence analysis (spec section 9), from the analyzer's flow engine.
    AnFlow = (c"metaroce.analysis.flow", c"Flow", U32, Dec, No, 0,
        Some(c"Index of the connection direction in the analyzer engine (stable within a capture)")),
    AnRetx = (c"metaroce.analysis.retransmission", c"Retransmission", Marker, NoBase, No, 0,
        Some(c"DATA with tx_attempt > 0, or a PSN seen again on its direction")),
    AnRetxOriginal = (c"metaroce.analysis.retransmission.original_frame", c"Original transmission in frame", FrameNum, NoBase, No, 0, None),
    AnRetxAttempt = (c"metaroce.analysis.retransmission.attempt", c"Attempt", U8, Dec, No, 0, None),
    AnRetxKind = (c"metaroce.analysis.retransmission.kind", c"Kind", Str, NoBase, No, 0,
        Some(c"fast (after a loss signal), timeout (none captured) or spurious")),
    AnSpurious = (c"metaroce.analysis.spurious_retransmission", c"Spurious retransmission", Marker, NoBase, No, 0,
        Some(c"The PSN was already cumulatively acked or SACKed, or a DUP feedback echoes it (spec 11.10)")),
    AnOutOfOrder = (c"metaroce.analysis.out_of_order", c"Out of order (PSNs below the highest)", U32, Dec, No, 0, None),
    AnPathLoss = (c"metaroce.analysis.path_loss", c"Path loss (path_seq values missing)", U32, Dec, No, 0, None),
    AnCeMarked = (c"metaroce.analysis.ce_marked", c"CE-marked", Marker, NoBase, No, 0,
        Some(c"The IP header carried ECN CE")),
    AnEce = (c"metaroce.analysis.ece", c"ECE echoed", Marker, NoBase, No, 0, None),
    AnAckRtt = (c"metaroce.analysis.ack_rtt", c"ACK RTT", Time, NoBase, No, 0,
        Some(c"Capture time of this feedback minus that of the transmission it echoes")),
    AnFabricRtt = (c"metaroce.analysis.fabric_rtt", c"Fabric RTT", Time, NoBase, No, 0,
        Some(c"ACK RTT minus the receiver hold time T3 - T2")),
    AnAckedFrame = (c"metaroce.analysis.acked_frame", c"Echoes the transmission in frame", FrameNum, NoBase, No, 0, None),
    AnDupOfFrame = (c"metaroce.analysis.dup_of_frame", c"Shows as spurious the retransmission in frame", FrameNum, NoBase, No, 0, None),
    AnShownSpuriousBy = (c"metaroce.analysis.spurious_retransmission.dup_frame", c"Shown spurious by the DUP feedback in frame", FrameNum, NoBase, No, 0,
        Some(c"A later DUP feedback echoing this retransmission or its original (spec 11.10); known on a second pass (tshark -2, the GUI)")),
    AnCumAckAdvance = (c"metaroce.analysis.cum_ack_advance", c"Cumulative ack advance (PSNs)", U32, Dec, No, 0, None),
    AnMsgCount = (c"metaroce.analysis.messages_completed", c"Messages completed", U16, Dec, No, 0, None),
    AnMsgId = (c"metaroce.analysis.message.msg_id", c"Message id", U32, Dec, No, 0, None),
    AnMsgOp = (c"metaroce.analysis.message.op", c"Operation", Str, NoBase, No, 0, None),
    AnMsgView = (c"metaroce.analysis.message.view", c"View", Str, NoBase, No, 0,
        Some(c"acked (sender view), delivered (receiver view) or read")),
    AnMsgLatency = (c"metaroce.analysis.message.latency", c"Message completion time", Time, NoBase, No, 0, None),
    AnStall = (c"metaroce.analysis.stall", c"Stall", Marker, NoBase, No, 0,
        Some(c"Unacknowledged data and no cumulative-ack advance for longer than the threshold")),
    AnStallElapsed = (c"metaroce.analysis.stall.elapsed", c"Time since the stall began", Time, NoBase, No, 0, None),
    AnStallEnded = (c"metaroce.analysis.stall.ended", c"Ended by this packet", Bool(0), NoBase, No, 0, None),

    // Conformance lint (docs/lint.md), from the same engine with its lint
    // on: one item per rule the packet broke; each rule also has its
    // expert info (`lint_abbrev`).
    Lint = (c"metaroce.lint", c"Lint rule broken", Str, NoBase, No, 0,
        Some(c"A rule of metaroce-analyze lint (docs/lint.md) this packet breaks, by id; its expert info is metaroce.lint.<id in lower case, - as _>")),

    // RoCEv2 analysis (the `rocev2` post-dissector beside Wireshark's
    // InfiniBand dissector), from the same engine.
    RcFlow = (c"rocev2.analysis.flow", c"Flow", U32, Dec, No, 0,
        Some(c"Index of the RC flow (requests one way, their responses the other) in the analyzer engine")),
    RcQp = (c"rocev2.analysis.qp", c"Flow QP", U32, Hex, No, 0,
        Some(c"The destination QP of the flow's requests, on its requests and its responses alike")),
    RcExpectedPsn = (c"rocev2.analysis.expected_psn", c"Expected PSN", U32, Dec, No, 0,
        Some(c"A request: the PSN after the highest of its flow so far")),
    RcPsnGap = (c"rocev2.analysis.psn_gap", c"PSN gap (PSNs skipped)", U32, Dec, No, 0,
        Some(c"A request beyond the expected PSN: the PSNs missing before it")),
    RcRetx = (c"rocev2.analysis.retransmission", c"Retransmission", Marker, NoBase, No, 0,
        Some(c"A request at or below the highest PSN of its flow (go-back-N resend, or a duplicate)")),
    RcRetxOriginal = (c"rocev2.analysis.retransmission.original_frame", c"Original transmission in frame", FrameNum, NoBase, No, 0, None),
    RcRetxKind = (c"rocev2.analysis.retransmission.kind", c"Kind", Str, NoBase, No, 0,
        Some(c"fast (after a PSN sequence error NAK), timeout (no NAK captured) or spurious (already acknowledged)")),
    RcGoBackN = (c"rocev2.analysis.go_back_n", c"Go-back-N retransmission", Marker, NoBase, No, 0,
        Some(c"A retransmission of a PSN not yet acknowledged (kind fast or timeout)")),
    RcDuplicate = (c"rocev2.analysis.duplicate", c"Duplicate request", Marker, NoBase, No, 0,
        Some(c"A request whose PSN was already acknowledged (a spurious retransmission)")),
    RcOutOfOrder = (c"rocev2.analysis.out_of_order", c"Out of order", Marker, NoBase, No, 0,
        Some(c"A request below the expected PSN whose earlier transmission was not captured")),
    RcAckedFrame = (c"rocev2.analysis.acked_frame", c"Acknowledges the request in frame", FrameNum, NoBase, No, 0,
        Some(c"An ACK, NAK or READ response: the request packet of the PSN it acknowledges through")),
    RcRequestFrame = (c"rocev2.analysis.request_frame", c"Answers the request in frame", FrameNum, NoBase, No, 0,
        Some(c"A READ response or atomic ACK: the READ or atomic request it answers")),
    RcAckRtt = (c"rocev2.analysis.ack_rtt", c"ACK RTT", Time, NoBase, No, 0,
        Some(c"Capture time of this response minus that of the request it acknowledges")),
    RcCumAckAdvance = (c"rocev2.analysis.cum_ack_advance", c"Cumulative ack advance (PSNs)", U32, Dec, No, 0, None),
    RcNak = (c"rocev2.analysis.nak", c"NAK", Str, NoBase, No, 0,
        Some(c"The NAK's syndrome in words (PSN sequence error, RNR NAK, ...)")),
    RcNakSyndrome = (c"rocev2.analysis.nak.syndrome", c"Syndrome", U8, Hex, No, 0, None),
    RcRnrTimer = (c"rocev2.analysis.nak.rnr_timer", c"RNR NAK timer", Time, NoBase, No, 0,
        Some(c"The time the requester must wait before retrying (IBTA's 5-bit encoding)")),
    RcReadResponse = (c"rocev2.analysis.read.response", c"READ response number", U32, Dec, No, 0,
        Some(c"1 for the response with the READ's PSN, and so on")),
    RcReadSpan = (c"rocev2.analysis.read.span", c"READ responses at most", U32, Dec, No, 0,
        Some(c"The READ's length at the smallest path MTU (256 bytes)")),
    RcReadComplete = (c"rocev2.analysis.read.complete", c"READ complete", Marker, NoBase, No, 0,
        Some(c"The last response of the READ, and every one before it arrived in order")),
    RcReadDiscarded = (c"rocev2.analysis.read.discarded", c"READ response not taken in order", Marker, NoBase, No, 0,
        Some(c"Beyond a missing response, or a duplicate: the requester discards it")),
    RcCnp = (c"rocev2.analysis.cnp", c"CNP", Marker, NoBase, No, 0, None),
    RcCnpInterval = (c"rocev2.analysis.cnp.interval", c"Time since the flow's previous CNP", Time, NoBase, No, 0, None),
    RcCeMarked = (c"rocev2.analysis.ce_marked", c"CE-marked", Marker, NoBase, No, 0,
        Some(c"The IP header carried ECN CE")),
    RcMsgCount = (c"rocev2.analysis.messages_completed", c"Messages completed", U16, Dec, No, 0, None),
    RcMsgOp = (c"rocev2.analysis.message.op", c"Operation", Str, NoBase, No, 0, None),
    RcMsgLatency = (c"rocev2.analysis.message.latency", c"Message completion time", Time, NoBase, No, 0, None),
    RcIcrc = (c"rocev2.icrc", c"ICRC (computed)", U32, Hex, No, 0,
        Some(c"The invariant CRC computed over the masked IP, UDP and BTH fields (IBTA annex A17.3.3), as Wireshark shows infiniband.invariant.crc")),
    RcIcrcStatus = (c"rocev2.icrc.status", c"ICRC status", U8, NoBase, ChecksumStatus, 0, None),
    RcLint = (c"rocev2.lint", c"Lint rule broken", Str, NoBase, No, 0,
        Some(c"An RC-* rule of metaroce-analyze lint (docs/lint.md) this packet breaks, by id; its expert info is rocev2.lint.<id in lower case, - as _>")),
}

impl Hf {
    pub const COUNT: usize = FIELDS.len();

    /// Hidden from the tree, there for filters (`metaroce.conn`).
    pub fn hidden(self) -> bool {
        matches!(self, Hf::Conn)
    }

    pub fn def(self) -> &'static FieldDef {
        &FIELDS[self as usize]
    }
}

/// Subtree kinds (`ett_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Ett {
    Root,
    Flags,
    TypeHeader,
    FbFlags,
    Features,
    Tlvs,
    Tlv,
    TlvEntry,
    Crc,
    Analysis,
    RoceRoot,
    RoceAnalysis,
}

impl Ett {
    pub const COUNT: usize = Ett::RoceAnalysis as usize + 1;
}

/// Expert info groups (mapped to `PI_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Malformed,
    Undecoded,
    Sequence,
    Checksum,
    Protocol,
}

/// Expert info severities (mapped to `PI_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Note,
    Warn,
    Error,
}

#[derive(Debug, Clone, Copy)]
pub struct ExpertDef {
    pub abbrev: &'static CStr,
    pub group: Group,
    pub severity: Severity,
    pub summary: &'static CStr,
}

/// Expert infos, indexed by `Ei as usize` in [`EXPERTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Ei {
    Malformed,
    CaptureTruncated,
    Trimmed,
    CrcBad,
    Warning,
    UnknownValue,
    Retransmission,
    SpuriousRetransmission,
    OutOfOrder,
    PathLoss,
    CeMarked,
    Stall,
    RcRetransmission,
    RcDuplicate,
    RcPsnGap,
    RcOutOfOrder,
    RcNak,
    RcIcrcBad,
    RcCeMarked,
}

pub const EXPERTS: &[ExpertDef] = &[
    ExpertDef {
        abbrev: c"metaroce.malformed",
        group: Group::Malformed,
        severity: Severity::Error,
        summary: c"Malformed MetaRoCE packet",
    },
    ExpertDef {
        abbrev: c"metaroce.capture_truncated",
        group: Group::Undecoded,
        severity: Severity::Warn,
        summary: c"MetaRoCE packet cut short by the capture (snaplen)",
    },
    ExpertDef {
        abbrev: c"metaroce.trimmed",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"Payload trimmed by a switch",
    },
    ExpertDef {
        abbrev: c"metaroce.crc.bad",
        group: Group::Checksum,
        severity: Severity::Error,
        summary: c"Bad CRC32C",
    },
    ExpertDef {
        abbrev: c"metaroce.warning",
        group: Group::Protocol,
        severity: Severity::Warn,
        summary: c"Legal but suspicious MetaRoCE header",
    },
    ExpertDef {
        abbrev: c"metaroce.unknown_value",
        group: Group::Undecoded,
        severity: Severity::Note,
        summary: c"Value not defined by MetaRoCE v1",
    },
    ExpertDef {
        abbrev: c"metaroce.retransmission",
        group: Group::Sequence,
        severity: Severity::Note,
        summary: c"Retransmission",
    },
    ExpertDef {
        abbrev: c"metaroce.spurious_retransmission",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"Spurious retransmission",
    },
    ExpertDef {
        abbrev: c"metaroce.out_of_order",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"Out-of-order DATA packet",
    },
    ExpertDef {
        abbrev: c"metaroce.path_loss",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"Packets lost on this path",
    },
    ExpertDef {
        abbrev: c"metaroce.ce_marked",
        group: Group::Sequence,
        severity: Severity::Note,
        summary: c"CE-marked packet",
    },
    ExpertDef {
        abbrev: c"metaroce.stall",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"Connection stalled",
    },
    ExpertDef {
        abbrev: c"rocev2.retransmission",
        group: Group::Sequence,
        severity: Severity::Note,
        summary: c"RoCEv2 go-back-N retransmission",
    },
    ExpertDef {
        abbrev: c"rocev2.duplicate",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"RoCEv2 duplicate request (PSN already acknowledged)",
    },
    ExpertDef {
        abbrev: c"rocev2.psn_gap",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"RoCEv2 PSN gap (requests missing before this one)",
    },
    ExpertDef {
        abbrev: c"rocev2.out_of_order",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"RoCEv2 request below the expected PSN, not captured before",
    },
    ExpertDef {
        abbrev: c"rocev2.nak",
        group: Group::Sequence,
        severity: Severity::Warn,
        summary: c"RoCEv2 NAK or RNR NAK",
    },
    ExpertDef {
        abbrev: c"rocev2.icrc.bad",
        group: Group::Checksum,
        severity: Severity::Error,
        summary: c"Bad RoCEv2 ICRC",
    },
    ExpertDef {
        abbrev: c"rocev2.ce_marked",
        group: Group::Sequence,
        severity: Severity::Note,
        summary: c"CE-marked RoCEv2 packet",
    },
];

impl Ei {
    pub const COUNT: usize = EXPERTS.len();

    pub fn def(self) -> &'static ExpertDef {
        &EXPERTS[self as usize]
    }
}

/// The expert info name of lint rule `id`: `MR-PKT-002` is
/// `metaroce.lint.mr_pkt_002` (a display-filter field name: lower case,
/// no `-`, so that a filter need not quote it).
/// The protocol a field, subtree or expert belongs to, by its abbrev.
pub fn is_rocev2(abbrev: &CStr) -> bool {
    abbrev.to_bytes().starts_with(b"rocev2.")
}

/// The expert info of a lint rule: `metaroce.lint.mr_pkt_002`,
/// `rocev2.lint.rc_req_001` (the RoCEv2 rules under the RoCEv2 analysis).
pub fn lint_abbrev(rule: &analyzer::lint::Rule) -> String {
    let proto = match rule.protocol {
        analyzer::lint::Protocol::MetaRoce => "metaroce",
        analyzer::lint::Protocol::RoceV2 => "rocev2",
    };
    format!(
        "{proto}.lint.{}",
        rule.id.to_ascii_lowercase().replace('-', "_")
    )
}

/// The expert severity of a lint rule: a MUST of the spec is an error, a
/// SHOULD or a heuristic a warning (group: Protocol).
pub fn lint_severity(rule: &analyzer::lint::Rule) -> Severity {
    match rule.severity {
        analyzer::lint::Severity::Error => Severity::Error,
        analyzer::lint::Severity::Warning => Severity::Warn,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn abbrevs_are_unique_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for f in FIELDS {
            let a = f.abbrev.to_str().unwrap();
            assert!(
                a.starts_with("metaroce.") || a.starts_with("rocev2."),
                "{a}"
            );
            assert!(seen.insert(a), "duplicate {a}");
        }
        for e in EXPERTS {
            assert!(seen.insert(e.abbrev.to_str().unwrap()));
        }
        let lint: Vec<String> = analyzer::lint::rules()
            .map(|(_, r)| lint_abbrev(r))
            .collect();
        for a in &lint {
            assert!(
                a.bytes().all(|b| b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'.'
                    || b == b'_'),
                "{a}"
            );
            assert!(seen.insert(a), "duplicate {a}");
        }
        let rule = |id| analyzer::lint::rules().find(|(_, r)| r.id == id).unwrap().1;
        assert_eq!(lint_abbrev(rule("MR-PKT-002")), "metaroce.lint.mr_pkt_002");
        assert_eq!(lint_abbrev(rule("RC-REQ-001")), "rocev2.lint.rc_req_001");
        assert_eq!(Hf::RcLint as usize + 1, Hf::COUNT);
        assert_eq!(Ei::RcCeMarked as usize + 1, Ei::COUNT);
    }

    #[test]
    fn spec_section_10_names_are_all_registered() {
        let names: std::collections::HashSet<_> =
            FIELDS.iter().map(|f| f.abbrev.to_str().unwrap()).collect();
        for n in SPEC_NAMES {
            assert!(names.contains(n), "missing {n}");
        }
    }

    /// Every display-filter name of spec section 10 (analysis excluded).
    pub(crate) const SPEC_NAMES: &[&str] = &[
        "metaroce.version",
        "metaroce.type",
        "metaroce.flags",
        "metaroce.flags.ar",
        "metaroce.flags.som",
        "metaroce.flags.eom",
        "metaroce.flags.se",
        "metaroce.flags.ext",
        "metaroce.flags.crc",
        "metaroce.hlen",
        "metaroce.tx_attempt",
        "metaroce.ev",
        "metaroce.path_seq",
        "metaroce.dst_conn",
        "metaroce.src_conn",
        "metaroce.psn",
        "metaroce.tx_ts",
        "metaroce.data.op",
        "metaroce.data.payload_len",
        "metaroce.data.msg_id",
        "metaroce.data.msg_offset",
        "metaroce.data.msg_len",
        "metaroce.data.remote_va",
        "metaroce.data.rkey",
        "metaroce.data.imm_data",
        "metaroce.fb.flags",
        "metaroce.fb.flags.ece",
        "metaroce.fb.flags.trim",
        "metaroce.fb.flags.dup",
        "metaroce.fb.flags.coal",
        "metaroce.fb.sack_words",
        "metaroce.fb.echo_ev",
        "metaroce.fb.echo_psn",
        "metaroce.fb.echo_tx_ts",
        "metaroce.fb.rx_ts",
        "metaroce.fb.ce_count",
        "metaroce.fb.rx_buf_level",
        "metaroce.fb.fwd_hops",
        "metaroce.fb.credit",
        "metaroce.ack.sack_base",
        "metaroce.ack.sack_bitmap",
        "metaroce.nack.code",
        "metaroce.nack.rnr_timer",
        "metaroce.nack.psn",
        "metaroce.cnp.reason",
        "metaroce.ctrl.op",
        "metaroce.ctrl.cc_algo",
        "metaroce.ctrl.mtu",
        "metaroce.ctrl.init_psn",
        "metaroce.ctrl.features",
        "metaroce.ctrl.ts_unit_ps",
        "metaroce.tlv.type",
        "metaroce.tlv.len",
        "metaroce.crc",
        "metaroce.crc.status",
    ];
}
