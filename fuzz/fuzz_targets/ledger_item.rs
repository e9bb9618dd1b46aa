#![no_main]

#[path = "../../tests/fuzz_regressions/checks.rs"]
#[allow(dead_code)] // each target uses one check
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::ledger_item(data));
