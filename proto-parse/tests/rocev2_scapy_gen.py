# Made with scapy 2.8.0 (pip install scapy): python3 rocev2_scapy_gen.py
# Generates RoCEv2 test vectors with scapy's contrib RoCE layer (its
# BTH.compute_icrc implements the IBTA annex A17 pseudo-header for IPv4 and
# IPv6 on its own), for proto-parse/tests/rocev2_scapy_vectors.rs.
import struct
from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, Raw, wrpcap
from scapy.contrib.roce import BTH, AETH, cnp

def be(fmt, *v): return struct.pack("!" + fmt, *v)
reth = lambda va, rkey, ln: be("QII", va, rkey, ln)
deth = lambda qkey, sqp: be("II", qkey, sqp & 0xffffff)
E = lambda: Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
v4 = lambda **kw: IP(src="10.1.2.3", dst="10.4.5.6", **kw)
v6 = lambda **kw: IPv6(src="fd00::1:2", dst="fd00::3:4", **kw)
u = lambda sport=49200: UDP(sport=sport, dport=4791)

pkts = [
  # 1 IPv6 RC ACK (NAK invalid request), TC 0x8b, flow label, hop limit 7, UDP checksum set
  E()/v6(tc=0x8b, fl=0xabcde, hlim=7)/u()/BTH(opcode=0x11, dqpn=0x000abc, psn=0x123456, fecn=1)/AETH(syndrome=0x61, msn=0x00beef),
  # 2 IPv6 CNP
  E()/v6(tc=0x02, fl=0x12345, hlim=64)/u(sport=0)/cnp(0x123456),
  # 3 IPv4 RC RDMA Write Only Immediate, pad 1, FECN, DSCP 26 ECT(0), TTL 3
  E()/v4(tos=0x6a, ttl=3)/u()/BTH(opcode=0x0b, padcount=1, fecn=1, solicited=1, dqpn=0x11, ackreq=1, psn=0xfffffe)/Raw(reth(0x00007f0012345678, 0xdeadbeef, 7) + be("I", 0xcafebabe) + b"payload\x00"),
  # 4 IPv6 in VLAN 42, UD Send Only Immediate: DETH + ImmDt + 40 bytes
  E()/Dot1Q(vlan=42, prio=3)/v6(tc=0xb8, fl=0x00001, hlim=255)/u()/BTH(opcode=0x65, dqpn=0x000123, psn=5, migreq=1)/Raw(deth(0x80010000, 0x00000099) + be("I", 0x01020304) + bytes(range(40))),
  # 5 IPv4 RC Compare & Swap: AtomicETH
  E()/v4(tos=0x03, ttl=64)/u()/BTH(opcode=0x13, dqpn=0x77, psn=100, ackreq=1)/Raw(be("QIQQ", 0x1000, 0x42, 0x1111111111111111, 0x2222222222222222)),
  # 6 IPv4 RC Atomic Acknowledge: AETH + AtomicAckETH
  E()/v4(ttl=64)/u()/BTH(opcode=0x12, dqpn=0x78, psn=100)/Raw(be("I", (0x03 << 24) | 9) + be("Q", 0x1111111111111111)),
  # 7 IPv6 RC ACK with RNR NAK timer 14
  E()/v6(hlim=1)/u()/BTH(opcode=0x11, dqpn=0x10, psn=77, becn=1)/AETH(syndrome=0x2e, msn=3),
  # 8 IPv4 RC Send Only with Invalidate: IETH + payload
  E()/v4(ttl=64)/u()/BTH(opcode=0x17, dqpn=0x10, psn=78, ackreq=1)/Raw(be("I", 0x00abcdef) + b"hi\x00\x00"),
  # 9 IPv4 UC RDMA Write First: RETH + 64 bytes
  E()/v4(ttl=64)/u()/BTH(opcode=0x26, dqpn=0x10, psn=79)/Raw(reth(0xffff000000000000, 1, 128) + bytes(64)),
  # 10 IPv4 RC RDMA Read Response Last: AETH (credit 0) + payload, pad 3
  E()/v4(ttl=64)/u()/BTH(opcode=0x0f, padcount=3, dqpn=0x10, psn=80)/Raw(be("I", 0x00000004) + b"x\x00\x00\x00"),
  # 11 IPv4 RC Send Last with Immediate, resv7 and resv6 bits set
  E()/v4(ttl=64)/u()/BTH(opcode=0x03, resv6=0x15, resv7=0x55, dqpn=0x10, psn=81)/Raw(be("I", 7) + b"abcd"),
]
wrpcap("rocev2_scapy.pcap", pkts)  # timestamps differ per run; the bytes do not
for p in pkts: print(len(p), bytes(p)[-4:].hex())
