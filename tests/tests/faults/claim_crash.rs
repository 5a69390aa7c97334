//! A worker's claim survives the service dying before answering it (issue 15): the
//! process aborts (as `kill -9` would end it) right after a claim committed and before
//! its answer left. The turn is not lost: the claim's lease expires, a restarted service
//! (or another replica) fences it off with `turn.lease_expired`, and the turn is claimed
//! again under a higher epoch; a late command under the lost claim's epoch is refused and
//! writes nothing.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use pm_tests::TestDb;
use serde_json::json;

use crate::support::{human_ai_conversation, poll, start};

async fn a_claim_whose_answer_was_lost_is_claimed_again_after_its_lease(db: TestDb) {
    let env = |failpoint: &'static str| {
        [
            ("DATABASE_URL", db.url.as_str()),
            ("PM_DB_POOL_SIZE", "8"),
            ("PM_FAILPOINT", failpoint),
        ]
    };
    let mut doomed = start(&env("abort_after_claim")).await;
    let api = doomed.api().clone();
    let (human, llm, conv) = human_ai_conversation(&api, "Crash").await;
    api.create(
        &format!("/v1/conversations/{conv}/messages"),
        &json!({"actor_id": human, "content": "please"}),
    )
    .await;
    let turn = poll(Duration::from_secs(10), || {
        let api = api.clone();
        let conv = conv.clone();
        async move {
            let r = api
                .get(&format!("/v1/turns?conversation_id={conv}"))
                .await
                .ok()?;
            let t = &r.json["items"][0];
            (t["state"] == "dispatched").then(|| t["id"].as_str().map(str::to_string))?
        }
    })
    .await
    .expect("the turn is dispatched");
    let r = api
        .post(
            "/v1/turns/claim",
            &json!({"worker": "doomed", "lease_ms": 1000}),
        )
        .await;
    assert!(
        r.is_err(),
        "the process dies before answering the claim: {r:?}"
    );
    let exit = doomed
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the process with the failpoint exits");
    assert_eq!(exit.signal(), Some(6), "aborted (SIGABRT), got {exit}");

    let svc = start(&env("")).await;
    let api = svc.api().clone();
    // The lost claim held the turn: epoch 2 (the dispatch was 1), leased to `doomed`.
    let row = api.must_get(&format!("/v1/turns/{turn}")).await;
    assert_eq!(row.json["claims"], 1, "{}", row.text);
    // Its lease expires; the turn is claimed again under a higher epoch.
    let claimed = poll(Duration::from_secs(10), || {
        let api = api.clone();
        async move {
            let r = api
                .post(
                    "/v1/turns/claim",
                    &json!({"worker": "finisher", "wait_ms": 2000}),
                )
                .await
                .ok()?;
            (r.status == 200).then_some(r)
        }
    })
    .await
    .expect("the turn is claimable again once the lost claim's lease expired");
    assert_eq!(claimed.json["turn"]["id"], turn.as_str());
    assert_eq!(claimed.json["turn_epoch"], 3, "{}", claimed.text);
    // The lost claim's late command is refused and not in the log.
    let late = api
        .post_with(
            &format!("/v1/conversations/{conv}/messages"),
            &json!({"actor_id": llm, "content": "late"}),
            &[("PM-Turn-Id", turn.as_str()), ("PM-Turn-Epoch", "2")],
        )
        .await
        .expect("answered");
    assert_eq!(late.status, 409, "{}", late.text);
    assert_eq!(late.json["code"], "turn_fenced");
    let events = api
        .events(&format!("conversation_id={conv}"))
        .await
        .expect("the log");
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types.iter().filter(|t| **t == "turn.lease_expired").count(),
        1,
        "{types:?}"
    );
    assert!(
        !events.iter().any(|e| e["data"]["content"] == "late"),
        "the refused command wrote nothing"
    );
}

per_backend!(
    a_claim_whose_answer_was_lost_is_claimed_again_after_its_lease,
    sqlite: [],
    postgres: []
);
