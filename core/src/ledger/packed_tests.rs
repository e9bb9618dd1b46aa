use super::*;

fn key() -> DeliveryKey {
    DeliveryKey::derive(
        &ReminderId::parse("r-1").unwrap(),
        &SubscriberId::parse("s-1").unwrap(),
        Channel::Email,
    )
}

/// Every optional field set, every enum with a value this version does not know.
fn full() -> DeliveryRecord {
    let t = |ms: i64| Timestamp::from_millis(1_800_000_000_000 + ms);
    let token = |s: &str| LeaseToken(s.to_owned());
    let mut history = BTreeMap::new();
    for (n, (from, to)) in [
        (Status::Scheduled, Status::Sending),
        (
            Status::Sending,
            Status::Unknown("parked_by_a_newer_version"),
        ),
        (Status::Dead, Status::Ready),
    ]
    .into_iter()
    .enumerate()
    {
        history.insert(
            (n + 7).to_string(),
            HistoryEntry {
                at: t(-(n as i64) * 1000),
                from,
                to,
                detail: (n != 1).then(|| format!("detail {n}")),
                redrive: (n == 2).then(|| RedriveAudit {
                    batch_id: "b-1".into(),
                    operator: "ops@example.com".into(),
                    note: "après la panne".into(),
                }),
            },
        );
    }
    DeliveryRecord {
        delivery_key: key(),
        status: Status::Unknown("parked_by_a_newer_version"),
        seq: 9,
        attempt_count: 3,
        throttle_count: 70_000,
        lease_token: Some(token("a")),
        lease_expires_at: Some(t(60_000)),
        next_eligible_at: Some(t(-5)),
        last_outcome_class: Some(OutcomeClass::Unknown("a_newer_class")),
        last_error: Some("http_503".into()),
        dead_reason: Some(DeadReason::Unknown("a_newer_reason")),
        dlq_copied_at: Some(t(1)),
        dlq_copy_claimed_at: Some(t(2)),
        died_under_lease: Some(token("b")),
        dlq_copy_claim: Some(token("c")),
        provider_receipt: Some("sim-1".into()),
        payload_version: u64::MAX,
        policy: Some(RetryPolicy {
            backoff: Backoff::Unknown(serde_json::json!({"kind": "newer", "k": [1, 2.5]})),
            ambiguous: AmbiguousRule::Unknown("a_newer_rule"),
            ..RetryPolicy::default()
        }),
        first_seen_at: t(0),
        updated_at: t(3),
        history,
        expires_at: -1,
        origin: Some(Origin {
            reminder_id: ReminderId::parse("r-1").unwrap(),
            subscriber_id: SubscriberId::parse("s-1").unwrap(),
            channel: Channel::Email,
            fallback_from: Some(Channel::Push),
            chain_head: true,
            chain: vec![Channel::Push, Channel::Email, Channel::Sms],
            unknown: Unknown::from_text(r#"{"newer_nested":[1,"x"]}"#).unwrap(),
        }),
        fallback_to: Some(Channel::Sms),
        maybe_sent: true,
        unknown: Unknown::from_text(r#"{"newer_mark":true,"newer_at":1800000000000}"#).unwrap(),
    }
}

#[test]
fn a_record_reads_back_as_written_whatever_it_holds() {
    let full = full();
    let mut bare = DeliveryRecord::fresh(&Ctx {
        key: key(),
        now: Timestamp::from_millis(0),
        expires_at: 0,
        origin: None,
    });
    bare.status = Status::Delivered;
    let mut policies = vec![full.clone(), bare.clone()];
    for backoff in [
        Backoff::Exponential {
            base_secs: 1,
            cap_secs: 300,
        },
        Backoff::Schedule {
            schedule_secs: vec![0, 30, 600],
        },
        Backoff::Fitted { factor: 4 },
    ] {
        let mut r = bare.clone();
        r.policy = Some(RetryPolicy {
            backoff,
            ambiguous: AmbiguousRule::Dead,
            ..RetryPolicy::default()
        });
        policies.push(r);
    }
    for r in policies {
        let bytes = r.pack();
        assert_eq!(DeliveryRecord::unpack(key(), &bytes), Some(r.clone()));
        assert_eq!(
            packed_fence(&bytes),
            Some((r.status, r.seq, r.lease_token.as_ref().map(|t| t.as_str())))
        );
        // A cut item is not a record.
        assert_eq!(
            DeliveryRecord::unpack(key(), &bytes[..bytes.len() - 1]),
            None
        );
    }
}

#[test]
fn a_delivered_record_packs_into_a_few_hundred_bytes() {
    // What the embedded pipeline keeps per delivery (the 1M demo's memory): a typed
    // record with its history map took over 2 KB.
    let mut r = full();
    r.status = Status::Delivered;
    r.policy = Some(RetryPolicy::default());
    // As this version writes it: nothing a newer version added.
    r.unknown = Unknown::default();
    if let Some(o) = r.origin.as_mut() {
        o.unknown = Unknown::default();
    }
    assert!(r.pack().len() <= 300, "{} bytes", r.pack().len());
}
