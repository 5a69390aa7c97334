//! Tool policies and approvals at the HTTP boundary (TRUST.md "Tool policies",
//! "Approvals"), on both stores, under the service's own default
//! (`PM_TOOL_DEFAULT_ACTION=require_approval`): the probes — a worker saying its
//! `shell.rm_rf` needs no approval, an approver naming itself — are refused or corrected;
//! policies are facts with their endpoints; self-approval and approvers outside the policy
//! are refused without writing; a call keeps the policy it was reported under.

use pm_domain::tool_policy::PolicyAction;
use pm_tests::{
    all_tokens, on_both_backends, Response, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM,
};
use project_manager::Config;
use serde_json::{json, Value};

use crate::documented::assert_answer;
use crate::sagas::types;
use crate::support::{config, events, post_with};
use crate::tools::{assert_refused, call_of, on_call};
use crate::workers::{claim, dispatched, epoch};

async fn send(
    svc: &TestService,
    method: reqwest::Method,
    token: &str,
    path: &str,
    body: Option<Value>,
) -> Response {
    let mut req = svc
        .client
        .request(method, format!("{}{path}", svc.base))
        .bearer_auth(token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    Response::read(req.send().await.expect("sent"))
        .await
        .expect("read")
}

async fn put(svc: &TestService, token: &str, name: &str, body: Value) -> Response {
    let path = format!("/v1/tool-policies/{name}");
    send(svc, reqwest::Method::PUT, token, &path, Some(body)).await
}

async fn log_len(svc: &TestService) -> usize {
    events(svc, "").await.len()
}

async fn policies_decide_and_approvers_are_who_is_signed_in(db: TestDb) {
    assert_eq!(
        Config::defaults().tool_default_action,
        PolicyAction::RequireApproval,
        "TRUST.md: the default is require_approval"
    );
    let mut config = config(&db);
    config.auth_tokens = all_tokens();
    config.tool_default_action = Config::defaults().tool_default_action;
    let svc = TestService::start_with(config).await;
    let doc = svc.get(None, "/openapi.json").await.json;

    // Policies are the admin's, each change a fact; a PUT of the same says 200 and writes
    // nothing; a bad one names its field.
    let no_rm = json!({"tools": "shell.rm*", "action": "deny", "reason": "never on this host"});
    let r = put(&svc, ADMIN, "no-rm", no_rm.clone()).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_answer(&doc, "put", "/v1/tool-policies/{name}", &r);
    assert!(r.header("x-event-position").is_some());
    let again = put(&svc, ADMIN, "no-rm", no_rm).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert!(
        again.header("x-event-position").is_none(),
        "nothing written"
    );
    assert_refused(
        &put(&svc, INGRESS, "x", json!({"tools": "*", "action": "allow"})).await,
        403,
        "forbidden",
    );
    let bad = put(
        &svc,
        ADMIN,
        "x",
        json!({"tools": "*", "action": "allow", "approvers": ["role:admin"]}),
    )
    .await;
    assert_refused(&bad, 422, "validation_failed");
    assert!(bad.text.contains("approvers"), "{}", bad.text);
    assert_refused(
        &put(
            &svc,
            ADMIN,
            "default",
            json!({"tools": "*", "action": "allow"}),
        )
        .await,
        422,
        "validation_failed",
    );
    let shell =
        json!({"tools": "shell.*", "action": "require_approval", "approvers": ["role:admin"]});
    assert_eq!(put(&svc, ADMIN, "shell", shell).await.status, 201);
    let http = json!({"tools": "http.*", "action": "allow"});
    assert_eq!(put(&svc, ADMIN, "http", http).await.status, 201);
    let list = svc.get(Some(LLM), "/v1/tool-policies").await;
    assert_answer(&doc, "get", "/v1/tool-policies", &list);
    let names: Vec<&str> = list.json["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["http", "no-rm", "shell"]);
    let one = svc.get(Some(ADMIN), "/v1/tool-policies/no-rm").await;
    assert_eq!(
        (one.status, &one.json["action"]),
        (200, &json!("deny")),
        "{}",
        one.text
    );

    // The worker says none of its calls needs a person; the service decides.
    let (conv, _, _, turn) = dispatched(&svc).await;
    let e1 = epoch(&claim(&svc, json!({"worker": "w-1"})).await);
    let calls = json!({"calls": [
        {"call_id": "rm", "tool_name": "shell.rm_rf", "arguments": {"path": "/"}, "requires_approval": false},
        {"call_id": "ls", "tool_name": "shell.ls", "arguments": {}},
        {"call_id": "get", "tool_name": "http.get", "arguments": {"url": "https://example.com"}},
        {"call_id": "misc", "tool_name": "calendar.read", "arguments": {}},
    ]});
    let epoch = e1.to_string();
    let headers = [
        ("PM-Turn-Id", turn.as_str()),
        ("PM-Turn-Epoch", epoch.as_str()),
    ];
    let path = format!("/v1/turns/{turn}/tool-calls");
    let r = post_with(&svc, Some(LLM), &path, &calls, &headers).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (rm, ls, get, misc) = (
        call_of(&r.json, "rm"),
        call_of(&r.json, "ls"),
        call_of(&r.json, "get"),
        call_of(&r.json, "misc"),
    );
    assert_eq!(
        (&rm["state"], &rm["policy"]),
        (&json!("denied"), &json!("no-rm"))
    );
    assert_eq!(rm["result"]["reason"], "policy:no-rm");
    assert_eq!(
        (&ls["state"], &ls["policy"]),
        (&json!("awaiting_approval"), &json!("shell"))
    );
    assert_eq!(ls["policy_reason"], "shell");
    assert_eq!(ls["approvers"], json!(["role:admin"]));
    assert_eq!(
        (&get["state"], &get["policy"]),
        (&json!("executing"), &json!("http"))
    );
    assert_eq!(
        (&misc["state"], &misc["policy"]),
        (&json!("awaiting_approval"), &json!("default"))
    );
    assert_eq!(misc["approvers"], json!(["role:admin", "role:ingress"]));
    assert_eq!(ls["reported_by"], "llm");
    let log = events(&svc, &format!("conversation_id={conv}")).await;
    let denied = log
        .iter()
        .find(|e| e["type"] == "tool.denied")
        .expect("tool.denied");
    assert_eq!(denied["data"]["reason"], "policy:no-rm");
    let called = log
        .iter()
        .find(|e| e["type"] == "tool.call" && e["data"]["call_id"] == "ls")
        .expect("tool.call");
    assert_eq!(called["data"]["policy"], "shell");

    // A policy changed while its calls wait: they keep the one they were reported under.
    let widened =
        json!({"tools": "shell.*", "action": "require_approval", "approvers": ["role:ingress"]});
    assert_eq!(put(&svc, ADMIN, "shell", widened).await.status, 200);
    let before = log_len(&svc).await;
    assert_refused(
        &on_call(&svc, INGRESS, &turn, "ls", "approve", json!({})).await,
        403,
        "approver_forbidden",
    );
    // The reporter never decides its own call, listed or not; a body naming an approver
    // is refused.
    assert_refused(
        &on_call(&svc, LLM, &turn, "misc", "approve", json!({})).await,
        403,
        "self_approval_forbidden",
    );
    assert_refused(
        &on_call(&svc, LLM, &turn, "misc", "deny", json!({})).await,
        403,
        "self_approval_forbidden",
    );
    assert_refused(
        &on_call(
            &svc,
            ADMIN,
            &turn,
            "misc",
            "approve",
            json!({"approver": "director"}),
        )
        .await,
        422,
        "validation_failed",
    );
    assert_eq!(log_len(&svc).await, before, "refusals write nothing");

    // The approver is who is signed in, with the person it relays and a comment.
    let human = crate::sagas::actor(&svc, "human", "Ada").await;
    let robot = crate::sagas::actor(&svc, "ai", "Bot").await;
    let ai_behalf = on_call(
        &svc,
        INGRESS,
        &turn,
        "misc",
        "approve",
        json!({"on_behalf_of": robot}),
    )
    .await;
    assert_refused(&ai_behalf, 422, "validation_failed");
    // Relaying a person's decision speaks for them: an analyst may not.
    let analyst = on_call(
        &svc,
        ANALYST,
        &turn,
        "misc",
        "approve",
        json!({"on_behalf_of": human}),
    )
    .await;
    assert_refused(&analyst, 403, "actor_forbidden");
    let a = on_call(
        &svc,
        INGRESS,
        &turn,
        "misc",
        "approve",
        json!({"on_behalf_of": human, "comment": "Ada said yes"}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_answer(
        &doc,
        "post",
        "/v1/turns/{turn_id}/tool-calls/{call_id}/approve",
        &a,
    );
    assert_eq!(
        (&a.json["approver"], &a.json["on_behalf_of"]),
        (&json!("ingress"), &json!(human))
    );
    assert_eq!(a.json["comment"], "Ada said yes");
    let d = on_call(
        &svc,
        ADMIN,
        &turn,
        "ls",
        "deny",
        json!({"reason": "not today", "comment": "ask again"}),
    )
    .await;
    assert_eq!(
        (d.status, &d.json["approver"]),
        (200, &json!("admin")),
        "{}",
        d.text
    );
    let log = events(&svc, &format!("conversation_id={conv}")).await;
    let approved = log
        .iter()
        .find(|e| e["type"] == "tool.approved")
        .expect("tool.approved");
    assert_eq!(approved["data"]["approver"], "ingress");
    assert_eq!(approved["principal"], "ingress");
    let denied = log
        .iter()
        .rev()
        .find(|e| e["type"] == "tool.denied")
        .expect("tool.denied");
    assert_eq!(
        (&denied["data"]["approver"], &denied["data"]["comment"]),
        (&json!("admin"), &json!("ask again"))
    );

    // Removed: the policy's fact, then 404.
    let del = send(
        &svc,
        reqwest::Method::DELETE,
        ADMIN,
        "/v1/tool-policies/no-rm",
        None,
    )
    .await;
    assert_eq!(del.status, 204, "{}", del.text);
    let gone = send(
        &svc,
        reqwest::Method::DELETE,
        ADMIN,
        "/v1/tool-policies/no-rm",
        None,
    )
    .await;
    assert_refused(&gone, 404, "tool_policy_not_found");
    assert_refused(
        &svc.get(Some(ADMIN), "/v1/tool-policies/no-rm").await,
        404,
        "tool_policy_not_found",
    );
    let facts = events(&svc, "types=project_manager.tool_policy.*").await;
    let kinds: Vec<&str> = facts.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "project_manager.tool_policy.set",
            "project_manager.tool_policy.set",
            "project_manager.tool_policy.set",
            "project_manager.tool_policy.set",
            "project_manager.tool_policy.removed"
        ]
    );
    assert_eq!(facts[0]["principal"], "admin");
    assert!(types(&svc, &conv)
        .await
        .iter()
        .any(|t| t == "tool.approved"));
    svc.stop().await;
}

/// The same through MCP: a model reporting its calls as harmless gets them decided by the
/// policies; it cannot approve what it reported.
async fn a_model_over_mcp_cannot_talk_its_way_past_a_policy(db: TestDb) {
    let mut config = config(&db);
    config.auth_tokens = all_tokens();
    config.tool_default_action = Config::defaults().tool_default_action;
    let svc = TestService::start_with(config).await;
    let deny = json!({"tools": "shell.rm*", "action": "deny"});
    assert_eq!(put(&svc, ADMIN, "no-rm", deny).await.status, 201);
    let (_, _, _, turn) = dispatched(&svc).await;
    let worker = crate::mcp::connect(&svc, LLM, None).await;
    let claimed = crate::mcp::ok_call(
        &worker,
        "claim_turn",
        json!({"wait_ms": 5000, "worker": "mcp-p"}),
    )
    .await;
    let epoch = claimed["turn_epoch"].as_i64().expect("turn_epoch");
    let model = crate::mcp::connect(&svc, LLM, Some((&turn, epoch))).await;
    let calls = json!({"turn_id": turn, "calls": [
        {"call_id": "rm", "tool_name": "shell.rm_rf", "arguments": {"path": "/"}, "requires_approval": false},
        {"call_id": "ls", "tool_name": "shell.ls", "arguments": {}, "requires_approval": false},
    ]});
    let row = crate::mcp::ok_call(&model, "report_tool_calls", calls).await;
    assert_eq!(call_of(&row, "rm")["state"], "denied", "{row}");
    assert_eq!(
        call_of(&row, "rm")["result"]["reason"],
        "policy:no-rm",
        "{row}"
    );
    assert_eq!(call_of(&row, "ls")["state"], "awaiting_approval", "{row}");
    assert_eq!(call_of(&row, "ls")["policy"], "default", "{row}");
    // Its own principal is the reporter: no approval of its own call.
    assert_refused(
        &on_call(&svc, LLM, &turn, "ls", "approve", json!({})).await,
        403,
        "self_approval_forbidden",
    );
    model.cancel().await.expect("close");
    worker.cancel().await.expect("close");
    svc.stop().await;
}

on_both_backends!(
    policies_decide_and_approvers_are_who_is_signed_in,
    a_model_over_mcp_cannot_talk_its_way_past_a_policy,
);
