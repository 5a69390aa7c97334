//! Defect 8: positions and limits. A position beyond the log's end or malformed, as
//! `min_position` on any query, or as `cursor` / `Last-Event-ID` on `/v1/events` (JSON and
//! SSE), is `400 invalid_position` at once, never a wait; `limit=-1` is a `400` naming
//! `limit`; a 60 KB path id is a `404` whose detail stays short.

use std::time::{Duration, Instant};

use pm_tests::http::Api;
use pm_tests::{Response, TestDb, TestService};
use serde_json::json;

/// "A position beyond the end of the log".
const BEYOND: &str = "999999999999";
const MALFORMED: [&str; 3] = ["abc", "1.2.3", "-1"];

/// Every query route, with real ids.
async fn query_routes(api: &Api) -> Vec<String> {
    let actor = api.actor().await;
    let c = api.conversation(&actor).await;
    let cp = api
        .create(
            &format!("/v1/conversations/{c}/checkpoints"),
            &json!({"checkpoint_type": "BEGIN_WORK", "summary": "Plan"}),
        )
        .await
        .id();
    let t = api
        .create(
            &format!("/v1/conversations/{c}/tasks"),
            &json!({"checkpoint_id": cp, "instructions": "Do it"}),
        )
        .await
        .id();
    let tc = api
        .create(
            &format!("/v1/tasks/{t}/checkpoints"),
            &json!({"type": "WORK_STARTED"}),
        )
        .await
        .id();
    let m = api.message(&c, &actor, "Hello").await.id();
    vec![
        format!("/v1/actors/{actor}"),
        "/v1/conversations".into(),
        format!("/v1/conversations/{c}"),
        format!("/v1/conversations/{c}/checkpoints"),
        format!("/v1/conversations/{c}/checkpoints/{cp}"),
        format!("/v1/conversations/{c}/messages"),
        format!("/v1/conversations/{c}/messages/{m}"),
        format!("/v1/conversations/{c}/tasks"),
        "/v1/tasks".into(),
        format!("/v1/tasks/{t}"),
        format!("/v1/tasks/{t}/checkpoints/{tc}"),
        "/v1/stats/tasks".into(),
    ]
}

/// `GET path` with headers; `Err` with what was wrong unless it is a `400
/// invalid_position` within 500 ms.
async fn expect_invalid_position(
    api: &Api,
    what: String,
    path: String,
    headers: Vec<(&'static str, &'static str)>,
) -> Result<(), String> {
    let mut req = api.client.get(api.url(&path));
    for (name, value) in &headers {
        req = req.header(*name, *value);
    }
    let t = Instant::now();
    let answer = req
        .send()
        .await
        .map_err(|e| format!("{what}: no answer: {e}"))?;
    let took = t.elapsed();
    if answer.status() == 200 {
        // A page, or an opened stream (dropping it closes it): not an error.
        return Err(format!("{what}: 200 after {took:?}"));
    }
    let r = Response::read(answer)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    if r.status != 400 || r.code() != "invalid_position" || took >= Duration::from_millis(500) {
        return Err(format!("{what}: {} {} after {took:?}", r.status, r.code()));
    }
    Ok(())
}

async fn positions_beyond_the_end_or_malformed_are_invalid_at_once(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let api = Api::new(svc.base.clone()).with_timeout(Duration::from_secs(10));
    let routes = query_routes(&api).await;
    let positions = || std::iter::once(BEYOND).chain(MALFORMED);
    let mut checks = Vec::new();
    for route in &routes {
        for position in positions() {
            let path = format!("{route}?min_position={position}");
            checks.push((format!("GET {path}"), path, vec![]));
        }
    }
    for position in positions() {
        for sse in [false, true] {
            let kind = if sse { "SSE" } else { "JSON" };
            let accept: Vec<(&'static str, &'static str)> = if sse {
                vec![("accept", "text/event-stream")]
            } else {
                vec![]
            };
            checks.push((
                format!("GET /v1/events?cursor={position} ({kind})"),
                format!("/v1/events?cursor={position}"),
                accept.clone(),
            ));
            let mut headers = accept;
            headers.push(("last-event-id", position));
            checks.push((
                format!("GET /v1/events with Last-Event-ID: {position} ({kind})"),
                "/v1/events".to_string(),
                headers,
            ));
        }
    }
    // At once: today a position beyond the end waits 5 s.
    let results = futures::future::join_all(
        checks
            .into_iter()
            .map(|(what, path, headers)| expect_invalid_position(&api, what, path, headers)),
    )
    .await;
    let wrong: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(
        wrong.is_empty(),
        "each must be 400 invalid_position within 500 ms:\n{}",
        wrong.join("\n")
    );
    svc.stop().await;
}

async fn a_negative_limit_is_a_400_naming_limit(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let api = Api::new(svc.base.clone());
    let routes = query_routes(&api).await;
    let mut wrong = Vec::new();
    let lists = routes
        .iter()
        .filter(|r| {
            !r.starts_with("/v1/stats")
                && (r.ends_with("/conversations")
                    || r.ends_with("/checkpoints")
                    || r.ends_with("/messages")
                    || r.ends_with("/tasks"))
        })
        .cloned()
        .chain(std::iter::once("/v1/events".to_string()));
    for route in lists {
        let path = format!("{route}?limit=-1");
        let r = api.get(&path).await.expect("answered");
        let detail = r.json["detail"].as_str().unwrap_or_default();
        if r.status != 400 || !detail.contains("limit") {
            wrong.push(format!("GET {path}: {} {detail:?}", r.status));
        }
    }
    assert!(
        wrong.is_empty(),
        "limit=-1 must be 400 naming `limit`:\n{}",
        wrong.join("\n")
    );
    svc.stop().await;
}

async fn a_huge_path_id_is_a_404_with_a_short_detail(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let api = Api::new(svc.base.clone());
    let huge = "a".repeat(60_000);
    for path in [
        format!("/v1/tasks/{huge}"),
        format!("/v1/actors/{huge}"),
        format!("/v1/conversations/{huge}"),
    ] {
        let r = api.get(&path).await.expect("answered");
        assert_eq!(r.status, 404, "GET <{} bytes>: {}", path.len(), r.status);
        let detail = r.json["detail"].as_str().unwrap_or_default();
        assert!(
            detail.len() < 300,
            "GET {}…: the 404's detail is {} characters long (must be < 300)",
            &path[..20],
            detail.len()
        );
    }
    svc.stop().await;
}

per_backend!(
    positions_beyond_the_end_or_malformed_are_invalid_at_once,
    sqlite: [],
    postgres: []
);
per_backend!(
    a_negative_limit_is_a_400_naming_limit,
    sqlite: [],
    postgres: []
);
per_backend!(
    a_huge_path_id_is_a_404_with_a_short_detail,
    sqlite: [],
    postgres: []
);
