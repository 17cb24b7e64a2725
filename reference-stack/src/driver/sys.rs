//! The only `unsafe` of the crate: batched UDP system calls (`sendmmsg`,
//! `recvmmsg` with the control messages of the IPv4 TOS or IPv6 traffic
//! class, for ECN, and of the IPv6 flow label), `ppoll`, path MTU
//! discovery and the route's MTU, the interface of an address, and forced
//! socket buffer sizes, through `libc`. IPv4 and IPv6. Each block says why
//! it is sound.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

use socket2::SockAddr;

/// Largest datagram received (jumbo frames included).
pub const MAX_DATAGRAM: usize = 9216;
const CTRL_LEN: usize = 64;

/// The socket address at `sa`, if it is IPv4 or IPv6.
///
/// # Safety
/// `sa` points to a valid socket address whose family field says its type
/// (`sockaddr_in` for AF_INET, `sockaddr_in6` for AF_INET6), in memory
/// large enough for that type.
unsafe fn socket_addr(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: by the caller's contract, the family is readable and names
    // the type of the address.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let a = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let a = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Buffers for one `recvmmsg` call.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u8; CTRL_LEN]>,
    pub lens: Vec<usize>,
    pub from: Vec<SocketAddr>,
    pub ce: Vec<bool>,
    /// IPv6: the datagram's flow label (0 on IPv4).
    pub flow_label: Vec<u32>,
}

impl RecvBatch {
    pub fn new(n: usize) -> Self {
        RecvBatch {
            bufs: (0..n).map(|_| vec![0; MAX_DATAGRAM]).collect(),
            // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
            addrs: (0..n).map(|_| unsafe { zeroed() }).collect(),
            ctrl: vec![[0; CTRL_LEN]; n],
            lens: vec![0; n],
            from: vec![SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)); n],
            ce: vec![false; n],
            flow_label: vec![0; n],
        }
    }

    pub fn datagram(&self, i: usize) -> &[u8] {
        &self.bufs[i][..self.lens[i]]
    }
}

/// Receives up to a batch of datagrams without blocking; `Ok(0)` when none
/// is waiting.
#[allow(clippy::needless_range_loop)]
pub fn recv_batch(fd: RawFd, b: &mut RecvBatch) -> io::Result<usize> {
    let n = b.bufs.len();
    let mut iovs: Vec<libc::iovec> = b
        .bufs
        .iter_mut()
        .map(|buf| libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: mmsghdr is plain old data; all-zero is valid.
        let mut h: libc::mmsghdr = unsafe { zeroed() };
        h.msg_hdr.msg_name = (&raw mut b.addrs[i]).cast();
        h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_hdr.msg_iov = &raw mut iovs[i];
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = b.ctrl[i].as_mut_ptr().cast();
        h.msg_hdr.msg_controllen = CTRL_LEN as _;
        hdrs.push(h);
    }
    // SAFETY: every header points into buffers owned by `b` and `iovs`,
    // which outlive the call; lengths match the buffers; the kernel writes
    // at most `n` entries.
    let r = unsafe {
        libc::recvmmsg(
            fd,
            hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock {
            Ok(0)
        } else {
            Err(e)
        };
    }
    let got = r as usize;
    for i in 0..got {
        let h = &mut hdrs[i];
        b.lens[i] = h.msg_len as usize;
        // SAFETY: the kernel wrote the sender's address (a UDP socket's:
        // sockaddr_in or sockaddr_in6, its family set) into the storage,
        // which is large enough for either.
        b.from[i] = unsafe { socket_addr((&raw const b.addrs[i]).cast()) }
            .unwrap_or(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));
        let mut ce = false;
        // The kernel leaves out a flow label of 0.
        let mut flow_label = 0;
        // SAFETY: the control buffer was filled by the kernel for this
        // message and `msg_controllen` says how much of it is valid; the
        // CMSG_* helpers stay inside it. IP_TOS carries one byte, the IPv6
        // traffic class an int, the IPv6 flow information a big-endian
        // 32-bit word.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&raw const h.msg_hdr);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::IPPROTO_IP && kind == libc::IP_TOS {
                    ce = *libc::CMSG_DATA(c) & 3 == 3;
                } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_TCLASS {
                    let tclass = libc::CMSG_DATA(c).cast::<libc::c_int>().read_unaligned();
                    ce = tclass & 3 == 3;
                } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_FLOWINFO {
                    let info = libc::CMSG_DATA(c).cast::<u32>().read_unaligned();
                    flow_label = u32::from_be(info) & FLOW_LABEL_MASK;
                }
                c = libc::CMSG_NXTHDR(&raw const h.msg_hdr, c);
            }
        }
        b.ce[i] = ce;
        b.flow_label[i] = flow_label;
    }
    Ok(got)
}

/// The 20 bits of an IPv6 flow label.
const FLOW_LABEL_MASK: u32 = 0xF_FFFF;

/// Sends every datagram of `msgs` (blocking socket), in `sendmmsg` calls of
/// up to 64; IPv6 datagrams leave with `flow_label` (a socket set up by
/// [`set_flow_labels`]). Returns the number of system calls.
#[allow(clippy::needless_range_loop)]
pub fn send_batch(fd: RawFd, msgs: &[(SocketAddr, &[u8])], flow_label: u32) -> io::Result<Sent> {
    let mut calls = 0;
    let mut too_big = 0;
    let mut done = 0;
    while done < msgs.len() {
        let chunk = &msgs[done..(done + 64).min(msgs.len())];
        let addrs: Vec<SockAddr> = chunk
            .iter()
            .map(|(a, _)| SockAddr::from(with_flow_label(*a, flow_label)))
            .collect();
        let mut iovs: Vec<libc::iovec> = chunk
            .iter()
            .map(|(_, d)| libc::iovec {
                iov_base: d.as_ptr().cast_mut().cast(),
                iov_len: d.len(),
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(chunk.len());
        for i in 0..chunk.len() {
            // SAFETY: mmsghdr is plain old data; all-zero is valid.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            // The kernel only reads the address: the pointer is made
            // mutable for the field's type.
            h.msg_hdr.msg_name = addrs[i].as_ptr().cast_mut().cast();
            h.msg_hdr.msg_namelen = addrs[i].len();
            h.msg_hdr.msg_iov = &raw mut iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            hdrs.push(h);
        }
        // SAFETY: headers point into `addrs`, `iovs` and the caller's
        // slices, all alive for the call; the kernel only reads the data.
        let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), hdrs.len() as libc::c_uint, 0) };
        calls += 1;
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => continue,
                // ICMP port unreachable from an earlier datagram: skip one.
                io::ErrorKind::ConnectionRefused => {
                    done += 1;
                    continue;
                }
                // Larger than the path's MTU with DF set: dropped like a
                // loss (the sender's recovery resends it), and counted.
                _ if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    done += 1;
                    too_big += 1;
                    continue;
                }
                _ => return Err(e),
            }
        }
        done += (r as usize).max(1);
    }
    Ok(Sent { calls, too_big })
}

/// What [`send_batch`] did.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// `sendmmsg` calls.
    pub calls: usize,
    /// Datagrams refused because they exceed the path MTU (DF set).
    pub too_big: usize,
}

/// Waits until `fd` is readable or `timeout_ns` pass.
pub fn wait_readable(fd: RawFd, timeout_ns: u64) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd and a valid timespec, both on the stack.
    let r = unsafe { libc::ppoll(&raw mut p, 1, &raw const ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const v).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: passes a pointer to a live c_int and its size, which the
    // kernel writes at most.
    let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut v).cast(), &raw mut len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

/// `addr` carrying `flow_label` in its `sin6_flowinfo` (IPv6; network
/// order, as the kernel reads the field, which std and socket2 copy as
/// is), for a socket that sends it ([`set_flow_labels`]).
fn with_flow_label(addr: SocketAddr, flow_label: u32) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) => SocketAddr::V6(SocketAddrV6::new(
            *a.ip(),
            a.port(),
            (flow_label & FLOW_LABEL_MASK).to_be(),
            a.scope_id(),
        )),
        v4 => v4,
    }
}

/// An IPv6 socket's flow labels (spec 1: the flow label SHOULD equal the
/// ev). It sends the label [`send_batch`] puts in the destination address
/// (IPV6_FLOWINFO_SEND; Linux takes it without a lease from the flow
/// label manager unless the namespace has exclusive leases), 0 included,
/// not the hash Linux derives from the flow by default (IPV6_AUTOFLOWLABEL
/// off); and it reports the label of each datagram it receives
/// (IPV6_FLOWINFO: [`recv_batch`]).
pub fn set_flow_labels(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_FLOWINFO_SEND, 1)?;
    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_AUTOFLOWLABEL, 0)?;
    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_FLOWINFO, 1)
}

/// Path MTU discovery: with `on`, datagrams leave with the don't-fragment
/// bit (IPv4) or may not be fragmented by this host (IPv6, whose routers
/// never fragment), and one larger than the path MTU fails (EMSGSIZE)
/// instead of being fragmented; without, the kernel fragments it.
pub fn set_dont_fragment(fd: RawFd, ipv6: bool, on: bool) -> io::Result<()> {
    if ipv6 {
        let mode = if on {
            libc::IPV6_PMTUDISC_DO
        } else {
            libc::IPV6_PMTUDISC_DONT
        };
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, mode)?;
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, i32::from(on))
    } else {
        let mode = if on {
            libc::IP_PMTUDISC_DO
        } else {
            libc::IP_PMTUDISC_DONT
        };
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, mode)
    }
}

/// Whether the socket sends with don't-fragment as [`set_dont_fragment`]
/// sets it (read back from the kernel).
#[cfg(test)]
pub fn dont_fragment(fd: RawFd, ipv6: bool) -> io::Result<bool> {
    Ok(if ipv6 {
        getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)? == libc::IPV6_PMTUDISC_DO
            && getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG)? == 1
    } else {
        getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)? == libc::IP_PMTUDISC_DO
    })
}

/// The MTU of the route from `local` to `peer` (the interface it leaves
/// through, or a smaller path MTU the kernel learnt): a UDP socket
/// connected to the peer, `IP_MTU` or `IPV6_MTU`. Nothing is sent.
pub fn route_mtu(local: IpAddr, peer: SocketAddr) -> io::Result<u32> {
    let s = std::net::UdpSocket::bind(SocketAddr::new(local, 0))?;
    s.connect(peer)?;
    let mtu = if peer.is_ipv6() {
        getsockopt_int(s.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_MTU)?
    } else {
        getsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU)?
    };
    Ok(mtu.max(0) as u32)
}

/// The name of the interface that holds the address `addr`.
pub fn interface_of(addr: IpAddr) -> io::Result<Option<String>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below.
    if unsafe { libc::getifaddrs(&raw mut list) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut name = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive
        // until freeifaddrs; ifa_addr, when not null, points to a sockaddr
        // whose family says its type, and ifa_name to a C string.
        unsafe {
            let ifa = &*cur;
            if !ifa.ifa_addr.is_null() && socket_addr(ifa.ifa_addr).is_some_and(|a| a.ip() == addr)
            {
                name = Some(
                    std::ffi::CStr::from_ptr(ifa.ifa_name)
                        .to_string_lossy()
                        .into_owned(),
                );
                break;
            }
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: frees the list getifaddrs returned, once.
    unsafe { libc::freeifaddrs(list) };
    Ok(name)
}

/// Socket buffers beyond `rmem_max` (root only; falls back silently).
pub fn force_buffers(fd: RawFd, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v);
    }
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, v);
    }
}

/// Waits until one of `fds` is readable or `timeout_ns` pass.
pub fn wait_any(fds: &[RawFd], timeout_ns: u64) -> io::Result<()> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `p` holds `p.len()` valid pollfds and `ts` is a valid
    // timespec; both outlive the call.
    let r = unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            &raw const ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
