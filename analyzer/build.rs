//! `ENGINE_VERSION`'s fingerprint: a hash of the engine's sources, so that
//! two builds of the same version number with different rules are told
//! apart (the Spark reduce checks that the exports, its driver and every
//! executor ran the same engine).

use std::fs;
use std::path::Path;

fn hash_dir(dir: &Path, h: &mut u64) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            hash_dir(&p, h);
        } else if let Ok(bytes) = fs::read(&p) {
            // FNV-1a over the file's name and bytes.
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for b in name.bytes().chain(bytes) {
                *h ^= u64::from(b);
                *h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    hash_dir(Path::new("src"), &mut h);
    println!("cargo:rustc-env=METAROCE_ENGINE_SOURCE={:012x}", h >> 16);
}
