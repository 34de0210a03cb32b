//! The C test programs in `tests/c/`, compiled with the system C compiler (`cc`, or `$CC`)
//! with `-Wall -Wextra -Werror` against the static library, then run plain, under valgrind
//! memcheck (0 errors, 0 leaks) and built with `-fsanitize=address,undefined`.
//!
//! valgrind or a sanitizer runtime that is missing skips that run, unless
//! `TETHER_REQUIRE_C_TOOLS=1` (as `.ci/run` sets) makes it a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `libtether_ffi.a` for the current sources. `cargo test` builds the library only as an
/// rlib for its tests, so this builds the static library itself, once per test binary, into
/// a target directory of its own (the outer cargo holds the lock on the main one).
fn library_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ffi-staticlib");
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "tether-ffi",
                    "--lib",
                    "--target-dir",
                ])
                .arg(&target)
                .arg("--manifest-path")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
                .status()
                .expect("cargo runs");
            assert!(status.success(), "cargo build -p tether-ffi failed");
            let dir = target.join("debug");
            assert!(
                dir.join("libtether_ffi.a").exists(),
                "no libtether_ffi.a in {}",
                dir.display()
            );
            dir
        })
        .clone()
}

fn require_tools() -> bool {
    std::env::var_os("TETHER_REQUIRE_C_TOOLS").is_some_and(|v| v == "1")
}

/// Compile `tests/c/<name>.c` with `extra` flags; the binary's path.
fn compile(name: &str, suffix: &str, extra: &[&str]) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}{suffix}"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args([
            "-std=c11",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .args(extra)
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join(format!("tests/c/{name}.c")))
        .arg(library_dir().join("libtether_ffi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("{cc} runs: {e}"));
    assert!(status.success(), "{cc} failed on {name}.c");
    out
}

fn run(mut command: Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what} runs: {e}"));
    assert!(
        output.status.success(),
        "{what}: {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The C programs in `tests/c/`.
const PROGRAMS: [&str; 4] = ["relay_session", "sse_session", "pool_session", "sign"];

#[test]
fn c_programs_pass_every_check() {
    for name in PROGRAMS {
        let exe = compile(name, "", &[]);
        run(Command::new(&exe), name);
    }
}

#[test]
fn c_programs_are_clean_under_valgrind() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        assert!(!require_tools(), "valgrind is not installed");
        eprintln!("valgrind is not installed: skipped");
        return;
    }
    for name in PROGRAMS {
        // Its own binary: the tests run in parallel, and executing a file another test is
        // still writing fails with "text file busy".
        let exe = compile(name, "-valgrind", &[]);
        let mut command = Command::new("valgrind");
        command
            .args([
                "--quiet",
                "--error-exitcode=99",
                "--leak-check=full",
                "--show-leak-kinds=definite,indirect,possible",
                "--errors-for-leak-kinds=definite,indirect,possible",
            ])
            .arg(&exe);
        run(command, &format!("{name} under valgrind"));
    }
}

#[test]
fn c_programs_are_clean_under_asan_and_ubsan() {
    let flags = [
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ];
    // A compiler without the sanitizer runtimes cannot link this; say so or fail.
    let probe = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .args(flags)
        .args(["-x", "c", "-", "-o"])
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("sanitizer-probe"))
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(b"int main(void){return 0;}\n")?;
            child.wait()
        });
    if !probe.is_ok_and(|s| s.success()) {
        assert!(!require_tools(), "the C compiler has no ASan/UBSan runtime");
        eprintln!("no sanitizer runtime: skipped");
        return;
    }
    for name in PROGRAMS {
        let exe = compile(name, "-asan", &flags);
        let mut command = Command::new(&exe);
        command
            .env(
                "ASAN_OPTIONS",
                "detect_leaks=1:abort_on_error=0:exitcode=99",
            )
            .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1");
        run(command, &format!("{name} with ASan/UBSan"));
    }
}
