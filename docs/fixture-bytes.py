import struct
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
def base(typ, flags, hlen, attempt, ev, pseq, dconn, sconn, psn, ts):
    return struct.pack(">BBBBHHIIII", 0x10|typ, flags, hlen, attempt<<4, ev, pseq, dconn, sconn, psn, ts)
def fb(fl, words, eev, epsn, ets, rxts, ce, lvl, hops, credit):
    return struct.pack(">BBHIIIHBBI", fl, words, eev, epsn, ets, rxts, ce, lvl, hops, credit)
out = {}
# 1 WRITE with CRC: SOM|EOM|CRC
p = base(0, 0x64, 13, 0, 3, 7, 0x11, 0x22, 100, 0x3B9ACA00) + struct.pack(">BBHIII", 2, 0, 4, 5, 0, 4) + struct.pack(">QI", 0x7F0000001000, 0xCAFEBABE) + bytes([0xDE,0xAD,0xBE,0xEF])
p += struct.pack(">I", crc32c(p)); out['WRITE_CRC'] = p
# 2 SEND_IMM, SOM, attempt 2, payload 2 of 6 message, no CRC
p = base(0, 0x40, 11, 2, 9, 1, 0x11, 0x22, 7, 1000) + struct.pack(">BBHIII", 1, 0, 2, 6, 0, 6) + struct.pack(">I", 0x01020304) + b"hi"
out['SEND_IMM'] = p
# 3 ACK with 2 sack words: cum ack 200, sack_base 200, bits 1,2 and 64
bm = (0b011 << 61).to_bytes(8,'big') + (1<<63).to_bytes(8,'big')
p = base(1, 0, 17, 0, 3, 8, 0x22, 0x11, 200, 5000) + fb(0x90, 2, 3, 202, 4000, 4500, 12, 30, 5, 0xFFFFFFFF) + struct.pack(">I", 200) + bm
out['ACK_SACK'] = p
# 4 NACK GAP with CRC
p = base(2, 0x04, 14, 0, 4, 9, 0x22, 0x11, 200, 6000) + fb(0, 0, 4, 205, 4100, 4600, 12, 31, 0, 65536) + struct.pack(">BBHI", 1, 0, 0, 201)
p += struct.pack(">I", crc32c(p)); out['NACK_GAP_CRC'] = p
# 5 CNP ECN
p = base(3, 0, 13, 0, 5, 10, 0x22, 0x11, 200, 6100) + fb(0x80, 0, 5, 206, 4200, 4700, 13, 0, 0, 0xFFFFFFFF) + struct.pack(">B3x", 1)
out['CNP_ECN'] = p
# 6 PROBE
p = base(4, 0x80, 6, 0, 12, 3, 0x11, 0x22, 42, 777)
out['PROBE'] = p
# 7 PROBE_REPLY
p = base(5, 0, 12, 0, 12, 4, 0x22, 0x11, 0, 900) + fb(0, 0, 12, 42, 777, 850, 0, 0, 3, 0xFFFFFFFF)
out['PROBE_REPLY'] = p
# 8 CTRL CONNECT
p = base(6, 0, 10, 0, 0, 0, 0, 0x22, 0, 0) + struct.pack(">BBHIII", 1, 1, 4096, 1000, 0b11011, 1000)
out['CTRL_CONNECT'] = p
# 9 SEND with TLVs: TS64 + PATH_STATUS(2 entries) ; header 40 + 12 + 12 = 64 -> hlen 16 ; flags EXT|SOM|EOM
tl = struct.pack(">BBxxQ", 3, 3, 1_700_000_000_123_456_789) + struct.pack(">BBxxHBxHBx", 2, 3, 1, 0, 2, 2)
p = base(0, 0x68, 16, 0, 1, 1, 0x11, 0x22, 300, 10) + struct.pack(">BBHIII", 0, 0, 3, 9, 0, 3) + tl + b"abc"
out['SEND_TLVS'] = p
# 10 READ_RESP trimmed: payload_len 8, only 3 bytes, CRC flag (trailer gone)
p = base(0, 0x04, 10, 0, 2, 2, 0x11, 0x22, 400, 20) + struct.pack(">BBHIII", 5, 0, 8, 4, 8, 16) + b"xyz"
out['READ_RESP_TRIMMED'] = p
# 11 READ_REQ
p = base(0, 0x60, 13, 0, 6, 5, 0x11, 0x22, 500, 30) + struct.pack(">BBHIII", 4, 0, 0, 11, 0, 65536) + struct.pack(">QI", 0x2000, 0x77)
out['READ_REQ'] = p
for k, v in out.items():
    hexs = ", ".join("0x%02x" % b for b in v)
    print(f"// {len(v)} bytes\nstatic {k}: [u8; {len(v)}] = [{hexs}];")
