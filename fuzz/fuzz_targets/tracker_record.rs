//! Fuzz target: the tracker's JSON record (the ConfigMap payload that says what an app owns)
//! must never panic the parser, whatever the cluster holds, and a record it accepts must
//! survive a round trip: written back and read again, it is the same record, so an agent
//! never forgets or invents an owned object by rewriting its tracker.

#![no_main]

use agent::tracker::TrackerRecord;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(record) = TrackerRecord::from_json("fuzz", json, Some("7".to_owned())) else {
        return;
    };
    let written = record.to_json();
    let again = TrackerRecord::from_json("fuzz", &written, Some("7".to_owned()))
        .unwrap_or_else(|error| panic!("a written record does not parse: {error}\n{written}"));
    assert_eq!(again, record, "the record changed in a round trip:\n{written}");
});
