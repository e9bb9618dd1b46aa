//! Every input kept under `fuzz/regressions/<target>/` (crashes the fuzzers found, once fixed,
//! and seeds worth keeping) replayed through the same checks as the cargo-fuzz targets, on
//! stable Rust, in CI.

mod checks;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the regression folder exists") {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().is_some_and(|f| f != ".gitkeep") {
            check(&std::fs::read(&path).unwrap());
            n += 1;
        }
    }
    n
}

#[test]
fn kept_inputs_pass_their_checks() {
    let total = replay("message", checks::message)
        + replay("reminder_item", checks::reminder_item)
        + replay("redrive_request", checks::redrive_request)
        + replay("retry_after", checks::retry_after)
        + replay("recipient", checks::recipient);
    assert!(total >= 5, "only {total} kept inputs");
}
