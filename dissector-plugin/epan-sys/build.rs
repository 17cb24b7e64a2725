//! Generates the bindings from the installed Wireshark headers.
//!
//! `pkg-config --cflags wireshark` gives the include paths (Debian:
//! `libwireshark-dev`); `clang`/`libclang-dev` must be installed for bindgen.
//! The allowlist keeps only what a dissector plugin needs.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config(args: &[&str]) -> String {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("wireshark")
        .output()
        .unwrap_or_else(|e| panic!("epan-sys: cannot run pkg-config: {e}"));
    if !out.status.success() {
        panic!(
            "epan-sys: `pkg-config {} wireshark` failed (install libwireshark-dev): {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).expect("pkg-config prints UTF-8")
}

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");

    let cflags = pkg_config(&["--cflags"]);
    let version = pkg_config(&["--modversion"]);
    let version = version.trim();
    println!("cargo:rustc-env=EPAN_SYS_WIRESHARK_VERSION={version}");
    // For dependents (DEP_WIRESHARK_VERSION).
    println!("cargo:version={version}");

    // The plugin is loaded into a process that already has libwireshark
    // mapped; linking it keeps the dependency explicit and lets `ldd` show it.
    for lib in pkg_config(&["--libs"]).split_whitespace() {
        if let Some(dir) = lib.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(name) = lib.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
    }

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(cflags.split_whitespace())
        .allowlist_function(
            "proto_.*|dissector_.*|col_.*|heur_.*|expert_.*|conversation_.*|tvb_.*|wmem_.*|\
             p_add_proto_data|p_get_proto_data|register_tap|tap_queue_packet|prefs_register_.*|\
             find_dissector|find_dissector_add_dependency|call_dissector|call_data_dissector|\
             create_dissector_handle|register_dissector|register_init_routine|\
             register_cleanup_routine|val_to_str.*|register_decode_as|epan_get_version|\
             get_data_source_tvb",
        )
        .allowlist_type(
            "hf_register_info|ei_register_info|proto_plugin|packet_info|frame_data|\
             expert_field|value_string|true_false_string|range_string|field_display_e|\
             proto_checksum_enum_e|ftenum|hf_ref_type|heuristic_enable_e|address_type|nstime_t",
        )
        .allowlist_var(
            "WIRESHARK_VERSION_.*|ENC_.*|COL_.*|PI_.*|BASE_.*|FT_.*|FI_.*|HF_REF_.*|HEURISTIC_.*|\
             PROTO_CHECKSUM_.*|FIELD_DISPLAY_E_MASK|BASE_DISPLAY_E_MASK|proto_checksum_vals|WTAP_ENCAP_.*",
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
