//! `include/tether.h` is what cbindgen makes of the sources: a stale header fails here.
//! `TETHER_BLESS=1 cargo test -p tether-ffi --test header` rewrites it.

use std::path::Path;

#[test]
fn committed_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8 header");
    let path = crate_dir.join("include/tether.h");
    if std::env::var_os("TETHER_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/tether.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/tether.h is stale: run `TETHER_BLESS=1 cargo test -p tether-ffi --test header` \
         and commit the result"
    );
}
