//! What an opcode does in the Reliable Connection service (IBTA 9.2,
//! 9.7): a request that starts, continues or ends a message, a response
//! that acknowledges, or a CNP (annex A17). A flow tracker reads a
//! packet's [`Role`] instead of matching the opcode table itself.

use super::opcode::{Opcode, Service};

/// The operation of an RC request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestOp {
    Send,
    Write,
    Read,
    Atomic,
}

impl RequestOp {
    /// The operation's name, lower case.
    pub const fn as_str(self) -> &'static str {
        match self {
            RequestOp::Send => "send",
            RequestOp::Write => "write",
            RequestOp::Read => "read",
            RequestOp::Atomic => "atomic",
        }
    }
}

/// An opcode's role in the RC service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A request packet: its operation, and whether it is the first and
    /// the last packet of its message (an `Only` opcode is both; a READ
    /// request and an atomic are first and not last: their responses end
    /// them).
    Request {
        op: RequestOp,
        first: bool,
        last: bool,
    },
    /// Every response acknowledges up to its PSN; the last one ends the READ.
    ReadResponse {
        last: bool,
    },
    Ack,
    AtomicAck,
    Cnp,
    /// Any other service (UC, UD, RD, XRC) or a reserved RC opcode.
    NotRc,
}

/// The RC role of `op`.
pub fn role(op: Opcode) -> Role {
    use Opcode::*;
    let req = |op, first, last| Role::Request { op, first, last };
    match op {
        RcSendFirst => req(RequestOp::Send, true, false),
        RcSendMiddle => req(RequestOp::Send, false, false),
        RcSendLast | RcSendLastImm | RcSendLastInvalidate => req(RequestOp::Send, false, true),
        RcSendOnly | RcSendOnlyImm | RcSendOnlyInvalidate => req(RequestOp::Send, true, true),
        RcRdmaWriteFirst => req(RequestOp::Write, true, false),
        RcRdmaWriteMiddle => req(RequestOp::Write, false, false),
        RcRdmaWriteLast | RcRdmaWriteLastImm => req(RequestOp::Write, false, true),
        RcRdmaWriteOnly | RcRdmaWriteOnlyImm => req(RequestOp::Write, true, true),
        RcRdmaReadRequest => req(RequestOp::Read, true, false),
        RcCompareSwap | RcFetchAdd => req(RequestOp::Atomic, true, false),
        RcRdmaReadResponseFirst | RcRdmaReadResponseMiddle => Role::ReadResponse { last: false },
        RcRdmaReadResponseLast | RcRdmaReadResponseOnly => Role::ReadResponse { last: true },
        RcAcknowledge => Role::Ack,
        RcAtomicAcknowledge => Role::AtomicAck,
        Cnp => Role::Cnp,
        other if other.service() == Service::Cnp => Role::Cnp,
        _ => Role::NotRc,
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn requests_say_where_their_message_starts_and_ends() {
        let req = |op, first, last| Role::Request { op, first, last };
        assert_eq!(role(Opcode::RcSendFirst), req(RequestOp::Send, true, false));
        assert_eq!(
            role(Opcode::RcSendMiddle),
            req(RequestOp::Send, false, false)
        );
        assert_eq!(
            role(Opcode::RcSendLastInvalidate),
            req(RequestOp::Send, false, true)
        );
        assert_eq!(
            role(Opcode::RcSendOnlyImm),
            req(RequestOp::Send, true, true)
        );
        assert_eq!(
            role(Opcode::RcRdmaWriteLastImm),
            req(RequestOp::Write, false, true)
        );
        assert_eq!(
            role(Opcode::RcRdmaWriteOnly),
            req(RequestOp::Write, true, true)
        );
        // READs and atomics are ended by their responses.
        assert_eq!(
            role(Opcode::RcRdmaReadRequest),
            req(RequestOp::Read, true, false)
        );
        assert_eq!(
            role(Opcode::RcFetchAdd),
            req(RequestOp::Atomic, true, false)
        );
        assert_eq!(
            role(Opcode::RcCompareSwap),
            req(RequestOp::Atomic, true, false)
        );
    }

    #[test]
    fn responses_cnps_and_other_services() {
        assert_eq!(
            role(Opcode::RcRdmaReadResponseMiddle),
            Role::ReadResponse { last: false }
        );
        assert_eq!(
            role(Opcode::RcRdmaReadResponseOnly),
            Role::ReadResponse { last: true }
        );
        assert_eq!(role(Opcode::RcAcknowledge), Role::Ack);
        assert_eq!(role(Opcode::RcAtomicAcknowledge), Role::AtomicAck);
        assert_eq!(role(Opcode::Cnp), Role::Cnp);
        assert_eq!(role(Opcode::UcSendOnly), Role::NotRc);
        assert_eq!(role(Opcode::UdSendOnly), Role::NotRc);
        assert_eq!(role(Opcode::from(0x15)), Role::NotRc, "reserved RC opcode");
    }

    #[test]
    fn every_cnp_service_opcode_is_a_cnp() {
        for byte in 0..=u8::MAX {
            let op = Opcode::from(byte);
            if op.service() == Service::Cnp {
                assert_eq!(role(op), Role::Cnp, "{byte:#04x}");
            }
        }
    }
}
