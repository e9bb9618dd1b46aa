//! A status written by a newer version (a deploy rolling out a new state): read into
//! [`Status::Unknown`] with its wire string, written back unchanged, and every change of this
//! version refused from it, an `extend` too.

use super::*;

/// A dead item as a newer writer stored it, its status renamed to `status`.
fn newer(status: &str) -> DeliveryRecord {
    let dead = in_state(Status::Dead).unwrap();
    let mut json = serde_json::to_value(&dead).unwrap();
    json["status"] = status.into();
    serde_json::from_value(json).expect("a status this version does not know still decodes")
}

#[test]
fn a_newer_status_is_read_and_written_back_as_it_was() {
    let rec = newer("paused_v9");
    assert_eq!(rec.status().as_str(), "paused_v9");
    assert!(!rec.status().is_known() && !rec.status().is_terminal());
    let json = serde_json::to_value(&rec).unwrap();
    assert_eq!(json["status"], "paused_v9");
    // The listed statuses keep their wire strings, and parse strictly.
    for s in ALL {
        assert_eq!(Status::read(s.as_str()), s);
        assert_eq!(s.as_str().parse::<Status>(), Ok(s));
    }
    assert!("paused_v9".parse::<Status>().is_err());
}

#[test]
fn every_change_from_a_newer_status_is_refused() {
    let rec = newer("paused_v9");
    let mut changes: Vec<Change> = table().into_iter().map(|(c, _, _)| c).collect();
    changes.push(Change::Extend);
    for change in changes {
        let name = change.name();
        let refused = apply(Some(&rec), change, &ctx_at(T0)).unwrap_err();
        assert_eq!(refused.why, Why::NewerStatus, "{name}");
        assert_eq!(refused.from.as_str(), "paused_v9", "{name}");
    }
}
