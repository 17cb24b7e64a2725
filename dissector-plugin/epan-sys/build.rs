//! Generates the bindings from the headers of the Wireshark being built for.
//!
//! Where the headers and libraries come from, first match wins:
//! - `METAROCE_WIRESHARK_CFLAGS` (and optionally `METAROCE_WIRESHARK_LIBS`):
//!   compiler and linker flags given by hand, for a Wireshark build tree
//!   without pkg-config (macOS, Windows: see the plugin's README);
//! - `METAROCE_WIRESHARK_ROOT`: a root file system holding another Wireshark
//!   line (`scripts/wireshark-root.sh`): `pkg-config` is pointed at its
//!   `.pc` files, with the root as sysroot, and clang at its system headers;
//! - else `pkg-config wireshark` (Debian: `libwireshark-dev`).
//!
//! The version is read from the headers' `ws_version.h`, the file the
//! plugin's `plugin_want_major/minor` come from, and becomes `cfg`s for the
//! few places where Wireshark lines differ (`wireshark_4_2` means "4.2 or
//! later", and so on; see `src/lib.rs`). `clang`/`libclang-dev` must be
//! installed for bindgen. The allowlist keeps only what a dissector plugin
//! needs.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Wireshark lines whose differences are named by a `cfg`.
const LINES: &[(u32, u32)] = &[(4, 2), (4, 4), (4, 6)];

/// Flags for clang and the linker.
struct Flags {
    cflags: Vec<String>,
    libs: Vec<String>,
}

fn pkg_config(root: Option<&Path>, args: &[&str]) -> String {
    let mut cmd = Command::new("pkg-config");
    cmd.args(args).arg("wireshark");
    if let Some(root) = root {
        let dirs: Vec<String> = pc_dirs(root)
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        cmd.env("PKG_CONFIG_SYSROOT_DIR", root)
            .env("PKG_CONFIG_LIBDIR", dirs.join(":"))
            .env_remove("PKG_CONFIG_PATH");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("epan-sys: cannot run pkg-config: {e}"));
    if !out.status.success() {
        panic!(
            "epan-sys: `pkg-config {} wireshark`{} failed (install libwireshark-dev): {}",
            args.join(" "),
            root.map(|r| format!(" in {}", r.display()))
                .unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).expect("pkg-config prints UTF-8")
}

/// The `.pc` folders of a Debian root: `usr/lib/<multiarch>/pkgconfig`,
/// `usr/lib/pkgconfig`, `usr/share/pkgconfig`.
fn pc_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join("usr/lib")) {
        for entry in entries.flatten() {
            let pc = entry.path().join("pkgconfig");
            if pc.join("wireshark.pc").exists() {
                dirs.push(pc);
            }
        }
    }
    dirs.push(root.join("usr/lib/pkgconfig"));
    dirs.push(root.join("usr/share/pkgconfig"));
    dirs
}

fn split(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(str::to_owned).collect()
}

fn locate() -> Flags {
    for var in [
        "METAROCE_WIRESHARK_CFLAGS",
        "METAROCE_WIRESHARK_LIBS",
        "METAROCE_WIRESHARK_ROOT",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if let Ok(cflags) = env::var("METAROCE_WIRESHARK_CFLAGS") {
        return Flags {
            cflags: split(&cflags),
            libs: split(&env::var("METAROCE_WIRESHARK_LIBS").unwrap_or_default()),
        };
    }
    let root = env::var_os("METAROCE_WIRESHARK_ROOT").map(PathBuf::from);
    let root = root.as_deref();
    let mut cflags = split(&pkg_config(root, &["--cflags"]));
    if let Some(root) = root {
        // The root's C library headers, not the host's.
        cflags.push(format!("--sysroot={}", root.display()));
        println!(
            "cargo:rerun-if-changed={}",
            root.join("usr/include/wireshark/ws_version.h").display()
        );
    }
    Flags {
        cflags,
        libs: split(&pkg_config(root, &["--libs"])),
    }
}

/// `(major, minor, micro)` from the first `ws_version.h` on the include path.
fn header_version(cflags: &[String]) -> (u32, u32, u32) {
    let dirs = cflags.iter().filter_map(|f| f.strip_prefix("-I"));
    let path = dirs
        .map(|d| Path::new(d).join("ws_version.h"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("epan-sys: no ws_version.h in the include folders of {cflags:?}")
        });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("epan-sys: cannot read {}: {e}", path.display()));
    let define = |name: &str| -> u32 {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("#define "))
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("epan-sys: no {name} in {}", path.display()))
    };
    (
        define("WIRESHARK_VERSION_MAJOR"),
        define("WIRESHARK_VERSION_MINOR"),
        define("WIRESHARK_VERSION_MICRO"),
    )
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");

    let flags = locate();
    let (major, minor, micro) = header_version(&flags.cflags);
    let version = format!("{major}.{minor}.{micro}");
    println!("cargo:rustc-env=EPAN_SYS_WIRESHARK_VERSION={version}");
    // For dependents (DEP_WIRESHARK_VERSION).
    println!("cargo:version={version}");
    for &(ma, mi) in LINES {
        println!("cargo:rustc-check-cfg=cfg(wireshark_{ma}_{mi})");
        if (major, minor) >= (ma, mi) {
            println!("cargo:rustc-cfg=wireshark_{ma}_{mi}");
        }
    }

    // The plugin is loaded into a process that already has libwireshark
    // mapped; linking it keeps the dependency explicit and lets `ldd` show it.
    for lib in &flags.libs {
        if let Some(dir) = lib.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = lib.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
    }

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(&flags.cflags)
        .allowlist_function(
            "proto_.*|dissector_.*|col_.*|heur_.*|expert_.*|conversation_.*|tvb_.*|wmem_.*|\
             p_add_proto_data|p_get_proto_data|register_tap|tap_queue_packet|prefs_register_.*|\
             find_dissector|find_dissector_add_dependency|call_dissector|call_data_dissector|\
             create_dissector_handle|register_dissector|register_postdissector|register_init_routine|\
             register_cleanup_routine|val_to_str.*|register_decode_as|epan_get_version|\
             get_data_source_tvb|register_conversation_table|add_conversation_table_data.*|\
             add_endpoint_table_data|stats_tree_.*|have_tap_listener",
        )
        .allowlist_type(
            "hf_register_info|ei_register_info|proto_plugin|packet_info|frame_data|\
             expert_field|value_string|true_false_string|range_string|field_display_e|\
             proto_checksum_enum_e|ftenum|hf_ref_type|heuristic_enable_e|address_type|nstime_t|\
             conv_hash_t|conv_item_t|endpoint_item_t|ct_dissector_info_t|et_dissector_info_t|\
             tap_packet_status|tap_flags_t|stats_tree|conv_filter_type_e|conversation_type|\
             endpoint_type|manip_node_mode|stat_node_datatype|epan_dissect_t",
        )
        .allowlist_var(
            "WIRESHARK_VERSION_.*|ENC_.*|COL_.*|PI_.*|BASE_.*|FT_.*|FI_.*|HF_REF_.*|HEURISTIC_.*|\
             PROTO_CHECKSUM_.*|FIELD_DISPLAY_E_MASK|BASE_DISPLAY_E_MASK|proto_checksum_vals|\
             WTAP_ENCAP_.*|WS_PLUGIN_DESC_.*",
        )
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("epan-sys: bindgen failed on the Wireshark headers");

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("epan-sys: cannot write bindings.rs");
}
