//! A direction's key: the addresses and connection ids of the DATA it
//! carries, and the key packed for hashing.

use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DirKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
}

/// `DirKey` packed for fast hashing (IPv4 as IPv4-mapped IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PackedKey {
    src: u128,
    dst: u128,
    conns: u64,
}

pub(crate) fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().to_bits(),
        IpAddr::V6(v6) => v6.to_bits(),
    }
}

impl DirKey {
    #[inline]
    pub fn packed(&self) -> PackedKey {
        PackedKey {
            src: ip_bits(self.src),
            dst: ip_bits(self.dst),
            conns: (u64::from(self.src_conn) << 32) | u64::from(self.dst_conn),
        }
    }

    pub fn reverse(&self) -> DirKey {
        DirKey {
            src: self.dst,
            dst: self.src,
            src_conn: self.dst_conn,
            dst_conn: self.src_conn,
        }
    }
}
